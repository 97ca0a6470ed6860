// dist::Reducer: data-parallel gradient synchronisation as PyTorch DDP, on
// MPI. Parameters are laid out in reverse registration order in one flat
// buffer cut into buckets (a small first one; autograd/gradient_buckets.h);
// a post-accumulate hook copies each final gradient into place and, once a
// bucket is complete, starts its non-blocking all-reduce, so communication
// overlaps the rest of backward.
// finish() waits for every bucket and averages. With zero = true (ZeRO-1)
// each rank keeps only the averaged gradient of its shard of the flat buffer
// (copied out of each bucket's all-reduce as it completes: Open MPI 4.1's
// non-blocking reduce-scatter was 10-16x slower), which dist::ZeroAdamW
// updates. With shard_grads as well (ZeRO-2) no full-size buffer is kept:
// each bucket is staged in a buffer of its own, freed once its all-reduce
// completes, and each parameter's .grad is released as soon as it is staged
// (a bucket of one parameter takes over its .grad instead). A bucket larger
// than message_bytes goes out in pieces of that size, one after the other.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "dist/communicator.h"

namespace ember::dist {

struct ReducerOptions {
  int64_t first_bucket_bytes = int64_t{1} << 20;  // the first bucket goes out early
  int64_t bucket_bytes = int64_t{25} << 20;
  bool zero = false;  // ZeRO-1: keep only this rank's shard of the reduced gradient
  // ZeRO-2 (with zero): keep only the shard; per-bucket staging, .grad released.
  bool shard_grads = false;
  // ZeRO-3's layout (with zero): per constructor parameter a unit id (e.g. its
  // transformer block). Buckets are then cut where the unit changes (in the
  // reverse order) and nowhere else, whatever their size, and each bucket is
  // sharded on its own: rank r keeps elements [n r / W, n (r+1) / W) of every
  // bucket of n (cut at multiples of 16), so a unit's gather is balanced.
  // Empty (ZeRO-1/2): by bytes, one contiguous range of the flat buffer per rank.
  std::vector<int64_t> units = {};
  // A bucket larger than this (one big parameter, e.g. the embedding table, or a ZeRO-3 unit)
  // is all-reduced in pieces of at most this size, one after the other, so MPI's temporary
  // for a non-blocking all-reduce (the message's size) stays this small. Later buckets start
  // once the last piece has.
  int64_t message_bytes = int64_t{32} << 20;
};

// Figures of the last synchronized step (all times in seconds).
struct ReducerStats {
  int64_t buckets = 0;
  int64_t bytes = 0;                 // gradient bytes this rank contributed
  int64_t launched_in_backward = 0;  // buckets started from a hook, during backward
  // Time some bucket was in flight (union of [start, completion seen]; the
  // hooks poll, so completion is seen at the next hook at the latest).
  double comm_seconds = 0;
  // In finish(): communication not hidden by backward, plus waiting for
  // ranks whose backward ends later (load imbalance looks the same).
  double wait_seconds = 0;
  // Fraction of the communication time hidden behind backward, in [0, 1].
  double overlap() const {
    return comm_seconds > 0 ? std::clamp(1.0 - wait_seconds / comm_seconds, 0.0, 1.0) : 1.0;
  }
};

// Elements [begin, end) of the flat buffer and the parameters (indices into
// the constructor's list) they hold.
struct Bucket {
  int64_t begin = 0, end = 0;
  std::vector<size_t> params;
};

class Reducer {
 public:
  // params: the model's parameters in registration order (those without
  // requires_grad are skipped); all of one float dtype. Registers a hook on
  // each; the hooks do nothing once the Reducer is gone. comm must outlive it.
  Reducer(Communicator& comm, const std::vector<Variable>& params, ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Gradient accumulation: set_sync(false) for every micro-step but the
  // last, whose backward then communicates the summed gradients. Default true.
  void set_sync(bool sync);
  bool sync() const;

  // After the synchronizing backward: starts the buckets no hook started
  // (parameters without a gradient on this rank count as zeros), waits for
  // all, and averages over ranks. Plain: each .grad becomes a view of the
  // averaged flat buffer; a parameter gets no .grad only when it has none on
  // every rank. ZeRO: .grad is left as it was (local); the averaged gradient
  // of this rank's shard is shard_grad(). Collective. No-op with one rank
  // (plain mode). With shard_grads, every .grad is released (undefined)
  // once staged, during backward or here.
  void finish();
  // Global L2 norm of the averaged gradient (docs/model.md#gradient-clipping), clipping
  // when max_norm > 0; returns the pre-clip norm. After finish(), both modes.
  double clip_grad_norm(double max_norm);

  const ReducerStats& stats() const;
  // Buckets started since the last finish() (to watch the overlap work).
  int64_t launched_buckets() const;

  // --- layout, for ZeroAdamW and tests ---------------------------------------
  const ReducerOptions& options() const;
  Communicator& comm() const;
  const std::vector<Variable>& params() const;  // the managed ones, in constructor order
  const std::vector<Bucket>& buckets() const;
  int64_t numel() const;  // elements of the flat buffer
  // Index of a parameter in params(); -1 when not managed here.
  int64_t index_of(const Variable& p) const;
  // Where params()[index] starts in the flat buffer.
  int64_t flat_offset(size_t index) const;
  // Per managed parameter: did any rank produce a gradient in the last step.
  const std::vector<bool>& has_grad() const;
  // Flat range [shard_begin(r), shard_begin(r + 1)) belongs to rank r (ZeRO
  // without units).
  int64_t shard_begin(int rank) const;
  // Any layout: rank r's piece of bucket b is the flat range
  // [piece_begin(b, r), piece_begin(b, r + 1)); this rank's shard is its
  // pieces in bucket order, the piece of bucket b at shard_offset(b).
  int64_t piece_begin(size_t b, int rank) const;
  int64_t shard_offset(size_t b) const;
  int64_t shard_numel() const;
  size_t bucket_of(size_t index) const;  // of params()[index]
  // ZeRO: this rank's shard of the averaged gradient (after finish()); without ZeRO empty.
  const Tensor& shard_grad() const;
  // The flat buffer (ZeRO-1 uses it to all-gather the parameters); with
  // shard_grads it is not kept (one element).
  const Tensor& flat() const;
  // Elements of bucket b in each rank's shard (ZeRO; sum = bucket size).
  const std::vector<int64_t>& bucket_shard_counts(size_t b) const;
  // Bytes of gradient buffers this Reducer holds now (flat, shard, staging).
  int64_t held_bytes() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ember::dist
