// dist::Communicator: the process's MPI world (Open MPI), RAII. Launched by
// mpirun it initialises MPI (MPI_THREAD_FUNNELED: only the main thread calls
// MPI) and finalizes it; run plainly it is world size 1 and never calls MPI.
// Collectives on contiguous Tensors, non-blocking all-reduce / reduce-scatter
// behind opaque Requests, sub-communicators (split into a dist::Group) and
// the two fault primitives (see docs/scaling.md).
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/profiler.h"
#include "core/tensor.h"

namespace ember::dist {

// The profiler family of MPI calls and waits (dist ranks 400-499 in the report).
extern const prof::Family kCommFamily;

enum class ReduceOp { Sum, Average, Max, Min };

class Group;  // dist/group.h

// How the Communicator decides whether to start MPI.
enum class Launch {
  Auto,    // MPI when launched by mpirun / srun (their environment is set), else single
  Single,  // never MPI: rank 0 of 1
  Mpi,     // always MPI (a plain run becomes an MPI singleton)
};

// Thrown on every rank by raise_if_any_failed with the message of the lowest
// failing rank: every rank knows it, so each can exit normally.
class CollectiveError : public Error {
 public:
  CollectiveError(const std::string& message, int failed_rank)
      : Error(message), failed_rank_(failed_rank) {}
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

// A non-blocking collective in flight (an index into its Communicator's table).
class Request {
 public:
  bool pending() const { return slot_ >= 0; }

 private:
  friend class Communicator;
  int slot_ = -1;
};

class Communicator {
 public:
  explicit Communicator(Launch launch = Launch::Auto);
  // Finalizes MPI; during the unwinding of an uncaught exception it calls
  // MPI_Abort instead (MPI_Finalize would wait for ranks that never arrive).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // True when the environment shows an mpirun / srun launch.
  static bool launched_by_mpirun();

  bool uses_mpi() const { return mpi_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool is_root() const { return rank_ == 0; }
  // Rank among the ranks on this node, and how many there are.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  // --- blocking collectives (every rank calls them in the same order) ------
  void barrier() const;
  // In place on a contiguous tensor (float32/64 any op; int32/64 not Average).
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) const;
  double all_reduce(double value, ReduceOp op = ReduceOp::Sum) const;
  std::vector<double> all_reduce(std::vector<double> values, ReduceOp op = ReduceOp::Sum) const;
  // True on every rank when flag is true on any rank.
  bool any(bool flag) const;
  // Every rank's value, indexed by rank.
  std::vector<uint64_t> all_gather(uint64_t value) const;
  // root's contents into t on every rank (same shape and dtype everywhere).
  void broadcast(const Tensor& t, int root = 0) const;
  void broadcast(std::string& s, int root = 0) const;
  // In place on a contiguous 1-d tensor: rank r contributes the counts[r]
  // elements at offset counts[0] + .. + counts[r-1]; all end with all of them.
  void all_gather_in_place(const Tensor& buffer, const std::vector<int64_t>& counts) const;
  // Rank r sends `part` (contiguous, counts[r] elements); root receives them
  // all, in rank order, into the contiguous `out` (sum of counts elements;
  // ignored on the other ranks, which may pass an empty Tensor).
  void gather(const Tensor& part, const Tensor& out, const std::vector<int64_t>& counts,
              int root = 0) const;

  // --- non-blocking (their buffers must stay alive until complete) ---------
  // Sum of t over ranks, in place.
  Request iall_reduce_sum(const Tensor& t);
  // Sum over ranks of `in` (1-d, sum of counts elements); rank r receives
  // elements [counts[0] + .. + counts[r-1], + counts[r]) of the sum in `out`.
  Request ireduce_scatter_sum(const Tensor& in, const Tensor& out,
                              const std::vector<int64_t>& counts);
  // all_gather_in_place, non-blocking, on a communicator of its own (ZeRO-3's
  // parameter gathers): its calls need not be ordered with the others
  // (iall_reduce_sum's), only among themselves.
  Request iall_gather_in_place(const Tensor& buffer, const std::vector<int64_t>& counts);
  // --- sub-communicators -------------------------------------------------------
  // MPI_Comm_split, collective (every rank calls it in the same order): the
  // ranks passing the same color (>= 0) form one Group, ordered by key, then
  // by world rank. In single mode a Group of size 1 without MPI. A Group must
  // not outlive its Communicator.
  Group split(int color, int key);
  // The same split as a Communicator of its own: every collective above (the reducer's, ZeRO's,
  // the consistency checks') then runs among those ranks only; a tensor-parallel run's
  // data-parallel ranks. Rank and world size are its own; local rank and size this one's.
  // Collective; it must not outlive this one, and it never finalizes MPI.
  std::unique_ptr<Communicator> split_communicator(int color, int key);

  // Drives progress; true (and the request no longer pending) once complete.
  // Also completes a Group's isend / irecv.
  bool test(Request& request);
  void wait(Request& request);

  // --- faults ----------------------------------------------------------------
  // Collective agreement, at a point every rank reaches: local_error is ""
  // when this rank is fine. When any rank failed, every rank throws
  // CollectiveError("rank r: <its message>") for the lowest failing rank r.
  void raise_if_any_failed(const std::string& local_error) const;
  // For an error only this rank knows (the others may be blocked in a
  // collective): prints "<prefix>rank r: message" to stderr and, with world
  // size > 1, MPI_Abort ends every rank of the job (mpirun exits non-zero);
  // never hangs. Returns 1 (the exit code) when the world size is 1.
  int abort_with(const std::string& message, const std::string& prefix = "") const;
  // main's catch block: a CollectiveError is printed by rank 0 only and
  // returns 1 on every rank (they exit normally); any other error goes
  // through abort_with. prefix starts the stderr line (e.g. "ember: error: ").
  int fail(const std::exception& error, const std::string& prefix = "") const;

 private:
  struct Child {};
  explicit Communicator(Child) {}  // split_communicator's
  bool child_ = false;       // made by split_communicator: frees its MPI_Comm, no MPI_Finalize
  friend class Group;
  // The MPI side of a Group, addressed by its handle (an index into Impl's
  // sub-communicators); Group checks the arguments and handles size 1.
  void group_all_reduce(int handle, const Tensor& t, ReduceOp op) const;
  void group_send(int handle, const Tensor& t, int peer, int tag) const;
  void group_recv(int handle, const Tensor& t, int peer, int tag) const;
  Request group_isend(int handle, const Tensor& t, int peer, int tag);
  Request group_irecv(int handle, const Tensor& t, int peer, int tag);
  void group_free(int handle);

  struct Impl;
  Impl* impl_ = nullptr;  // MPI handles; null in single mode
  bool mpi_ = false;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace ember::dist
