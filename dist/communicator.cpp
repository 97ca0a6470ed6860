// The Communicator over MPI: the only file that includes mpi.h. Every MPI
// call goes through mpi_check, so a failure becomes an ember::Error naming
// the call, the rank and MPI's own error text (errors return, never abort).
// In single mode (world size 1 without mpirun) no MPI function is called.
#include "dist/communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/threads.h"
#include "dist/group.h"

namespace ember::dist {

const prof::Family kCommFamily = prof::register_family("comm", 400);

struct Communicator::Impl {
  MPI_Comm world = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD: ember's own traffic
  MPI_Comm gathers = MPI_COMM_NULL;  // another: ZeRO-3's parameter gathers, made on first use
  std::vector<MPI_Request> requests;
  std::vector<std::vector<int>> counts;  // a request's count array lives until it completes
  std::vector<int> free_slots;
  std::vector<MPI_Comm> groups;  // the Groups' sub-communicators (MPI_COMM_NULL once freed)

  int add(MPI_Request request, std::vector<int> request_counts) {
    if (free_slots.empty()) {
      requests.push_back(request);
      counts.push_back(std::move(request_counts));
      return static_cast<int>(requests.size()) - 1;
    }
    const int slot = free_slots.back();
    free_slots.pop_back();
    requests[slot] = request;
    counts[slot] = std::move(request_counts);
    return slot;
  }
  void release(int slot) {
    counts[slot].clear();
    free_slots.push_back(slot);
  }
};

namespace {

bool g_alive = false;  // one Communicator per process (MPI starts once)

void mpi_check(int code, const char* call, int rank) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(detail::concat(call, " failed on rank ", rank, ": ", text));
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int32:
      return MPI_INT32_T;
    case DType::Int64:
      return MPI_INT64_T;
    case DType::BFloat16:  // matmul operands only, never communicated
      break;
  }
  throw Error(detail::concat("MPI: no datatype for ", dtype_name(dt), " tensors"));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

int checked_count(int64_t n, const char* what) {
  EMBER_CHECK(n >= 0 && n <= INT_MAX, what, ": ", n,
              " elements is more than one MPI call carries (", INT_MAX, ")");
  return static_cast<int>(n);
}

// MPI's per-rank element counts and displacements (the parts laid end to end)
// of a v-collective, and their total.
struct Layout {
  std::vector<int> counts, displs;
  int64_t total = 0;
};
Layout layout_of(const std::vector<int64_t>& counts, const char* what) {
  Layout l;
  for (int64_t c : counts) {
    l.counts.push_back(checked_count(c, what));
    l.displs.push_back(checked_count(l.total, what));
    l.total += c;
  }
  return l;
}

void require_contiguous(const Tensor& t, const char* what) {
  EMBER_CHECK(t.defined() && t.is_contiguous(), what,
              ": the tensor must be defined and contiguous");
}

void divide_by(const Tensor& t, int w) {
  dispatch_float(t.dtype(), "all_reduce(Average)", [&](auto tag) {
    using T = decltype(tag);
    T* d = t.data<T>();
    const int64_t n = t.numel();
    const T tw = static_cast<T>(w);
#pragma omp parallel for simd if (n > 2 * kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i] /= tw;
  });
}

}  // namespace

bool Communicator::launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(var)) return true;
  }
  return false;
}

Communicator::Communicator(Launch launch) {
  EMBER_CHECK(!g_alive, "dist::Communicator: only one may exist per process");
  g_alive = true;
  mpi_ = launch == Launch::Mpi || (launch == Launch::Auto && launched_by_mpirun());
  if (!mpi_) return;
  try {
    int finalized = 0;
    MPI_Finalized(&finalized);
    EMBER_CHECK(!finalized, "dist::Communicator: MPI was already finalized in this process");
    // Open MPI's non-blocking all-reduce (libnbc) picks a binomial tree for
    // in-place buffers or fewer than 4 ranks, moving every byte twice; the
    // ring is bandwidth-optimal. An explicit user setting wins (overwrite = 0).
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "ring", 0);
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread",
              -1);
    impl_ = new Impl;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->world), "MPI_Comm_dup", -1);
    MPI_Comm_set_errhandler(impl_->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(impl_->world, &rank_);
    MPI_Comm_size(impl_->world, &world_size_);
    EMBER_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI_Init_thread: this MPI gives thread level ",
                provided, "; ember needs MPI_THREAD_FUNNELED");
    MPI_Comm local = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split_type(impl_->world, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type", rank_);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  } catch (...) {
    g_alive = false;
    throw;
  }
}

Communicator::~Communicator() {
  if (!child_) g_alive = false;
  if (!mpi_) return;
  for (MPI_Request& r : impl_->requests) {
    if (r != MPI_REQUEST_NULL && std::uncaught_exceptions() == 0) MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  // The world's destructor decides about an uncaught exception; a child only lets go of its own.
  if (std::uncaught_exceptions() > 0 && world_size_ > 1 && !child_) {
    std::fprintf(stderr, "rank %d: leaving on an exception no one caught; aborting the job\n",
                 rank_);
    std::fflush(stderr);
    MPI_Abort(impl_->world, 1);
  }
  for (MPI_Comm& group : impl_->groups) {
    if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
  }
  if (impl_->gathers != MPI_COMM_NULL) MPI_Comm_free(&impl_->gathers);
  MPI_Comm_free(&impl_->world);
  delete impl_;
  if (!child_) MPI_Finalize();
}

std::unique_ptr<Communicator> Communicator::split_communicator(int color, int key) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  EMBER_CHECK(color >= 0, "Communicator::split_communicator: the color must be at least 0, got ", color);
  std::unique_ptr<Communicator> child(new Communicator(Child{}));
  child->child_ = true;
  child->mpi_ = mpi_;
  child->local_rank_ = local_rank_;
  child->local_size_ = local_size_;
  if (!mpi_) return child;
  child->impl_ = new Impl;
  mpi_check(MPI_Comm_split(impl_->world, color, key, &child->impl_->world), "MPI_Comm_split", rank_);
  MPI_Comm_set_errhandler(child->impl_->world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(child->impl_->world, &child->rank_);
  MPI_Comm_size(child->impl_->world, &child->world_size_);
  return child;
}

void Communicator::barrier() const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  if (!mpi_) return;
  mpi_check(MPI_Barrier(impl_->world), "MPI_Barrier", rank_);
}

void Communicator::all_reduce(const Tensor& t, ReduceOp op) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  require_contiguous(t, "all_reduce");
  EMBER_CHECK(op != ReduceOp::Average || is_floating(t.dtype()),
              "all_reduce: Average needs a float tensor, got ", dtype_name(t.dtype()));
  if (world_size_ == 1) return;
  const int64_t chunk = INT_MAX / 2;
  const size_t elem = dtype_size(t.dtype());
  for (int64_t begin = 0; begin < t.numel(); begin += chunk) {
    const int n = static_cast<int>(std::min(chunk, t.numel() - begin));
    char* data = static_cast<char*>(t.raw_data()) + begin * static_cast<int64_t>(elem);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, data, n, mpi_type(t.dtype()), mpi_op(op), impl_->world),
              "MPI_Allreduce", rank_);
  }
  if (op == ReduceOp::Average) divide_by(t, world_size_);
  t.bump_version();
}

double Communicator::all_reduce(double value, ReduceOp op) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  return all_reduce(std::vector<double>{value}, op)[0];
}

std::vector<double> Communicator::all_reduce(std::vector<double> values, ReduceOp op) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  if (world_size_ == 1 || values.empty()) return values;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, values.data(), checked_count(values.size(), "all_reduce"),
                          MPI_DOUBLE, mpi_op(op), impl_->world),
            "MPI_Allreduce", rank_);
  if (op == ReduceOp::Average) {
    for (double& v : values) v /= world_size_;
  }
  return values;
}

bool Communicator::any(bool flag) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  if (world_size_ == 1) return flag;
  int value = flag ? 1 : 0;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_LOR, impl_->world), "MPI_Allreduce",
            rank_);
  return value != 0;
}

std::vector<uint64_t> Communicator::all_gather(uint64_t value) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  std::vector<uint64_t> out(world_size_, value);
  if (world_size_ == 1) return out;
  mpi_check(MPI_Allgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, impl_->world),
            "MPI_Allgather", rank_);
  return out;
}

void Communicator::broadcast(const Tensor& t, int root) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  require_contiguous(t, "broadcast");
  if (!mpi_) return;
  const int64_t chunk = INT_MAX / 2;
  const size_t elem = dtype_size(t.dtype());
  for (int64_t begin = 0; begin < t.numel(); begin += chunk) {
    const int n = static_cast<int>(std::min(chunk, t.numel() - begin));
    char* data = static_cast<char*>(t.raw_data()) + begin * static_cast<int64_t>(elem);
    mpi_check(MPI_Bcast(data, n, mpi_type(t.dtype()), root, impl_->world), "MPI_Bcast", rank_);
  }
  t.bump_version();
}

void Communicator::broadcast(std::string& s, int root) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  if (!mpi_) return;
  int64_t size = static_cast<int64_t>(s.size());
  mpi_check(MPI_Bcast(&size, 1, MPI_INT64_T, root, impl_->world), "MPI_Bcast", rank_);
  s.resize(static_cast<size_t>(size));
  mpi_check(MPI_Bcast(s.data(), checked_count(size, "broadcast"), MPI_CHAR, root, impl_->world),
            "MPI_Bcast", rank_);
}

void Communicator::all_gather_in_place(const Tensor& buffer,
                                       const std::vector<int64_t>& counts) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  require_contiguous(buffer, "all_gather_in_place");
  EMBER_CHECK(static_cast<int>(counts.size()) == world_size_,
              "all_gather_in_place: ", counts.size(), " counts for ", world_size_, " ranks");
  if (world_size_ == 1) return;
  const Layout l = layout_of(counts, "all_gather_in_place");
  EMBER_CHECK(l.total <= buffer.numel(), "all_gather_in_place: counts add up to ", l.total,
              " but the buffer has ", buffer.numel(), " elements");
  mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.raw_data(), l.counts.data(),
                           l.displs.data(), mpi_type(buffer.dtype()), impl_->world),
            "MPI_Allgatherv", rank_);
  buffer.bump_version();
}

void Communicator::gather(const Tensor& part, const Tensor& out, const std::vector<int64_t>& counts,
                          int root) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  EMBER_CHECK(static_cast<int>(counts.size()) == world_size_, "gather: ", counts.size(),
              " counts for ", world_size_, " ranks");
  EMBER_CHECK(part.numel() == counts[rank_], "gather: this rank sends ", part.numel(),
              " elements but its count is ", counts[rank_]);
  require_contiguous(part, "gather");
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (rank_ == root) {
    require_contiguous(out, "gather");
    EMBER_CHECK(out.numel() == total && out.dtype() == part.dtype(), "gather: the output must hold ",
                total, " ", dtype_name(part.dtype()), " elements");
  }
  if (world_size_ == 1) {
    if (total > 0) out.reshape({total}).copy_(part.reshape({total}));
    return;
  }
  const Layout l = layout_of(counts, "gather");
  void* recv = rank_ == root ? out.raw_data() : nullptr;
  mpi_check(MPI_Gatherv(part.raw_data(), l.counts[rank_], mpi_type(part.dtype()), recv, l.counts.data(),
                        l.displs.data(), mpi_type(part.dtype()), root, impl_->world),
            "MPI_Gatherv", rank_);
  if (rank_ == root) out.bump_version();
}

Request Communicator::iall_reduce_sum(const Tensor& t) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  require_contiguous(t, "iall_reduce_sum");
  Request r;
  if (world_size_ == 1) return r;  // complete already
  MPI_Request req;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), checked_count(t.numel(), "iall_reduce_sum"),
                           mpi_type(t.dtype()), MPI_SUM, impl_->world, &req),
            "MPI_Iallreduce", rank_);
  r.slot_ = impl_->add(req, {});
  return r;
}

Request Communicator::ireduce_scatter_sum(const Tensor& in, const Tensor& out,
                                          const std::vector<int64_t>& counts) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  require_contiguous(in, "ireduce_scatter_sum");
  require_contiguous(out, "ireduce_scatter_sum");
  EMBER_CHECK(in.dtype() == out.dtype(), "ireduce_scatter_sum: input is ", dtype_name(in.dtype()),
              " but output is ", dtype_name(out.dtype()));
  EMBER_CHECK(static_cast<int>(counts.size()) == world_size_,
              "ireduce_scatter_sum: ", counts.size(), " counts for ", world_size_, " ranks");
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  EMBER_CHECK(total == in.numel() && counts[rank_] <= out.numel(),
              "ireduce_scatter_sum: counts add up to ", total, " for an input of ", in.numel(),
              " and this rank's ", counts[rank_], " for an output of ", out.numel());
  Request r;
  if (world_size_ == 1) {
    if (total > 0) out.narrow(0, 0, total).copy_(in);
    return r;
  }
  std::vector<int> n(world_size_);
  for (int i = 0; i < world_size_; ++i) n[i] = checked_count(counts[i], "ireduce_scatter_sum");
  MPI_Request req;
  mpi_check(MPI_Ireduce_scatter(in.raw_data(), out.raw_data(), n.data(), mpi_type(in.dtype()),
                                MPI_SUM, impl_->world, &req),
            "MPI_Ireduce_scatter", rank_);
  r.slot_ = impl_->add(req, std::move(n));
  return r;
}

Request Communicator::iall_gather_in_place(const Tensor& buffer,
                                           const std::vector<int64_t>& counts) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  require_contiguous(buffer, "iall_gather_in_place");
  EMBER_CHECK(static_cast<int>(counts.size()) == world_size_, "iall_gather_in_place: ",
              counts.size(), " counts for ", world_size_, " ranks");
  Request r;
  if (world_size_ == 1) return r;
  if (impl_->gathers == MPI_COMM_NULL) {  // collective too: every rank makes its first gather
    mpi_check(MPI_Comm_dup(impl_->world, &impl_->gathers), "MPI_Comm_dup", rank_);
    MPI_Comm_set_errhandler(impl_->gathers, MPI_ERRORS_RETURN);
  }
  // counts then displacements, kept with the request until it completes
  std::vector<int> n(2 * world_size_);
  int64_t offset = 0;
  for (int i = 0; i < world_size_; ++i) {
    n[i] = checked_count(counts[i], "iall_gather_in_place");
    n[world_size_ + i] = checked_count(offset, "iall_gather_in_place");
    offset += counts[i];
  }
  EMBER_CHECK(offset <= buffer.numel(), "iall_gather_in_place: counts add up to ", offset,
              " but the buffer has ", buffer.numel(), " elements");
  MPI_Request req;
  mpi_check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.raw_data(), n.data(),
                            n.data() + world_size_, mpi_type(buffer.dtype()), impl_->gathers, &req),
            "MPI_Iallgatherv", rank_);
  r.slot_ = impl_->add(req, std::move(n));
  return r;
}

Group Communicator::split(int color, int key) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  EMBER_CHECK(color >= 0, "Communicator::split: the color must be at least 0, got ", color);
  if (!mpi_) return Group(this, -1, 0, 1);
  MPI_Comm sub = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split(impl_->world, color, key, &sub), "MPI_Comm_split", rank_);
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(sub, &rank);
  MPI_Comm_size(sub, &size);
  impl_->groups.push_back(sub);
  return Group(this, static_cast<int>(impl_->groups.size()) - 1, rank, size);
}

void Communicator::group_all_reduce(int handle, const Tensor& t, ReduceOp op) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), checked_count(t.numel(), "Group::all_reduce"),
                          mpi_type(t.dtype()), mpi_op(op), impl_->groups[handle]),
            "MPI_Allreduce", rank_);
  t.bump_version();
}

void Communicator::group_send(int handle, const Tensor& t, int peer, int tag) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  mpi_check(MPI_Send(t.raw_data(), checked_count(t.numel(), "Group::send"), mpi_type(t.dtype()),
                     peer, tag, impl_->groups[handle]),
            "MPI_Send", rank_);
}

void Communicator::group_recv(int handle, const Tensor& t, int peer, int tag) const {
  EMBER_PROFILE_SCOPE(kCommFamily);
  const int count = checked_count(t.numel(), "Group::recv");
  MPI_Status status;
  mpi_check(
      MPI_Recv(t.raw_data(), count, mpi_type(t.dtype()), peer, tag, impl_->groups[handle], &status),
      "MPI_Recv", rank_);
  int received = 0;
  MPI_Get_count(&status, mpi_type(t.dtype()), &received);
  EMBER_CHECK(received == count, "Group::recv: expected ", count, " elements from group rank ",
              peer, ", got ", received);
  t.bump_version();
}

Request Communicator::group_isend(int handle, const Tensor& t, int peer, int tag) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  MPI_Request req;
  mpi_check(MPI_Isend(t.raw_data(), checked_count(t.numel(), "Group::isend"), mpi_type(t.dtype()),
                      peer, tag, impl_->groups[handle], &req),
            "MPI_Isend", rank_);
  Request r;
  r.slot_ = impl_->add(req, {});
  return r;
}

Request Communicator::group_irecv(int handle, const Tensor& t, int peer, int tag) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  MPI_Request req;
  mpi_check(MPI_Irecv(t.raw_data(), checked_count(t.numel(), "Group::irecv"), mpi_type(t.dtype()),
                      peer, tag, impl_->groups[handle], &req),
            "MPI_Irecv", rank_);
  t.bump_version();
  Request r;
  r.slot_ = impl_->add(req, {});
  return r;
}

void Communicator::group_free(int handle) {
  if (!impl_ || handle < 0 || impl_->groups[handle] == MPI_COMM_NULL) return;
  MPI_Comm_free(&impl_->groups[handle]);
}

bool Communicator::test(Request& request) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  if (!request.pending()) return true;
  int done = 0;
  mpi_check(MPI_Test(&impl_->requests[request.slot_], &done, MPI_STATUS_IGNORE), "MPI_Test", rank_);
  if (!done) return false;
  impl_->release(request.slot_);
  request.slot_ = -1;
  return true;
}

void Communicator::wait(Request& request) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  if (!request.pending()) return;
  mpi_check(MPI_Wait(&impl_->requests[request.slot_], MPI_STATUS_IGNORE), "MPI_Wait", rank_);
  impl_->release(request.slot_);
  request.slot_ = -1;
}

void Communicator::raise_if_any_failed(const std::string& local_error) const {
  if (world_size_ == 1) {
    if (!local_error.empty()) throw CollectiveError(local_error, 0);
    return;
  }
  int failed = local_error.empty() ? INT_MAX : rank_;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MIN, impl_->world),
            "MPI_Allreduce", rank_);
  if (failed == INT_MAX) return;
  std::string message = local_error;
  broadcast(message, failed);
  throw CollectiveError(detail::concat("rank ", failed, ": ", message), failed);
}

int Communicator::abort_with(const std::string& message, const std::string& prefix) const {
  if (world_size_ > 1) {
    std::fprintf(stderr, "%srank %d: %s\n", prefix.c_str(), rank_, message.c_str());
  } else {
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), message.c_str());
  }
  std::fflush(stderr);
  if (mpi_ && world_size_ > 1) MPI_Abort(impl_->world, 1);
  return 1;
}

int Communicator::fail(const std::exception& error, const std::string& prefix) const {
  if (dynamic_cast<const CollectiveError*>(&error)) {
    if (is_root()) {
      std::fprintf(stderr, "%s%s\n", prefix.c_str(), error.what());
      std::fflush(stderr);
    }
    return 1;
  }
  return abort_with(error.what(), prefix);
}

}  // namespace ember::dist
