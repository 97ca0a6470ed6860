// The bucketed gradient reducer: bucket layout, the post-accumulate hook
// (copy into the flat buffer, start complete buckets in bucket order so every
// rank issues the same collectives in the same order, poll the ones in flight
// to drive MPI progress), and finish() (start the rest, agree on which
// parameters have gradients, wait, average). ZeRO-2 stages each bucket in a
// buffer of its own, freed when its all-reduce completes; a bucket of one
// parameter reduces that parameter's gradient in place. A large bucket goes
// out in pieces, each started when the previous one completes.
#include "dist/reducer.h"

#include <chrono>
#include <cmath>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/gradient_buckets.h"
#include "core/kernels/elementwise.h"
#include "core/threads.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

namespace ember::dist {
namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// t /= w (a true division: exact when the sum is a multiple of w).
void divide_(const Tensor& t, int w) {
  dispatch_float(t.dtype(), "Reducer", [&](auto tag) {
    using T = decltype(tag);
    T* d = t.numel() ? t.data<T>() : nullptr;
    const int64_t n = t.numel();
    const T tw = static_cast<T>(w);
#pragma omp parallel for simd if (n > 2 * kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i] /= tw;
  });
  t.bump_version();
}

}  // namespace

struct Reducer::State {
  Communicator* comm = nullptr;
  ReducerOptions options;
  std::vector<Variable> params;
  std::vector<int64_t> offset;    // per parameter: start in flat
  std::vector<size_t> bucket_of;  // per parameter
  std::unordered_map<const VariableImpl*, size_t> index;
  std::vector<Bucket> buckets;
  std::vector<std::vector<int64_t>> bucket_counts;  // ZeRO: per bucket, elements per rank
  std::vector<std::vector<int64_t>> pieces;         // per bucket, W + 1 piece starts
  std::vector<int64_t> shard_offsets;               // per bucket: this rank's piece in the shard
  std::vector<int64_t> shard_starts;                // W + 1 entries (layout without units)
  Tensor flat, shard_storage, shard_grad;
  std::vector<Tensor> staging;  // ZeRO-2: per bucket, while it is filled and in flight
  int64_t numel = 0;

  // Per-step state.
  bool sync = true;
  std::vector<char> copied;       // per parameter: its gradient is in flat
  std::vector<int64_t> missing;   // per bucket: parameters not yet copied
  std::vector<Request> requests;  // per bucket: its piece in flight
  std::vector<int64_t> issued;    // per bucket: elements whose all-reduce has started
  std::vector<char> done;
  std::vector<Clock::time_point> started, finished;  // per bucket
  size_t next_launch = 0;
  Tensor flags;  // per parameter: 1 where this rank has a gradient, max-reduced
  std::vector<bool> has_grad;
  ReducerStats stats, running;

  int world() const { return comm->world_size(); }
  bool communicates() const { return world() > 1; }

  Tensor flat_slice(size_t i) const {
    return flat.narrow(0, offset[i], params[i].numel()).view(params[i].shape());
  }

  // Elements [begin, end) of the flat layout: a view of flat, or (ZeRO-2) of
  // the bucket's staging buffer, allocated on first use.
  Tensor bucket_buffer(size_t b) {
    const Bucket& bucket = buckets[b];
    if (!options.shard_grads) return flat.narrow(0, bucket.begin, bucket.end - bucket.begin);
    if (!staging[b].defined()) staging[b] = Tensor::empty({bucket.end - bucket.begin}, flat.dtype());
    return staging[b];
  }
  Tensor grad_slot(size_t i) {
    if (!options.shard_grads) return flat_slice(i);
    const int64_t at = offset[i] - buckets[bucket_of[i]].begin;
    return bucket_buffer(bucket_of[i]).narrow(0, at, params[i].numel()).view(params[i].shape());
  }
  void bucket_done(size_t b) {
    done[b] = 1;
    finished[b] = Clock::now();
    if (options.zero) {  // keep this rank's shard of the summed bucket
      const int r = comm->rank();
      const int64_t n = bucket_counts[b][r];
      if (n > 0) {
        shard_storage.narrow(0, shard_offsets[b], n)
            .copy_(bucket_buffer(b).narrow(0, pieces[b][r] - buckets[b].begin, n));
      }
    }
    staging[b] = Tensor();
  }

  // ZeRO shards. Without units rank r owns [N r / W, N (r+1) / W) of the flat
  // buffer; with units [n r / W, n (r+1) / W) of each bucket of n. Cut at
  // multiples of 16 elements.
  int64_t shard_len = 0;
  std::vector<int64_t> units;  // per managed parameter (with options.units)
  void lay_out_shards() {
    const int w = comm->world_size(), rank = comm->rank();
    shard_starts.assign(w + 1, numel);
    for (int r = 0; r < w; ++r) shard_starts[r] = (numel * r / w) / 16 * 16;
    for (const Bucket& b : buckets) {
      std::vector<int64_t> at(w + 1, b.end), counts(w);
      for (int r = 0; r < w; ++r) {
        at[r] = units.empty() ? std::clamp(shard_starts[r], b.begin, b.end)
                              : b.begin + ((b.end - b.begin) * r / w) / 16 * 16;
      }
      for (int r = 0; r < w; ++r) counts[r] = at[r + 1] - at[r];
      shard_offsets.push_back(shard_len);
      shard_len += counts[rank];
      pieces.push_back(std::move(at));
      bucket_counts.push_back(std::move(counts));
    }
  }

  void reset_step() {
    std::fill(copied.begin(), copied.end(), 0);
    std::fill(done.begin(), done.end(), 0);
    for (size_t b = 0; b < buckets.size(); ++b) {
      missing[b] = static_cast<int64_t>(buckets[b].params.size());
    }
    flags.zero_();
    std::fill(issued.begin(), issued.end(), 0);
    next_launch = 0;
    running = ReducerStats{};
  }

  // ZeRO-2/3: a bucket of one parameter takes over its gradient's buffer as its staging buffer
  // (the all-reduce then runs on it in place) instead of copying it: for a large parameter (the
  // embedding table) a second full-size buffer would be live while the copy runs.
  bool adoptable(size_t i, const Tensor& grad) const {
    const size_t b = bucket_of[i];
    return options.shard_grads && buckets[b].params.size() == 1 && !staging[b].defined() &&
           grad.dtype() == flat.dtype() && grad.is_contiguous() && grad.offset() == 0 &&
           grad.storage().use_count() == 1;
  }

  void copy_in(size_t i, const Tensor& grad) {
    if (grad.defined()) {
      if (adoptable(i, grad)) {
        staging[bucket_of[i]] = grad.reshape({params[i].numel()});
      } else {
        const Tensor dst = grad_slot(i);
        if (grad.raw_data() != dst.raw_data()) dst.copy_(grad);  // a view of flat already: in place
      }
      flags.set({static_cast<int64_t>(i)}, 1.0);
    } else {
      grad_slot(i).zero_();
    }
    copied[i] = 1;
    --missing[bucket_of[i]];
    if (options.shard_grads) params[i].zero_grad();  // ZeRO-2: the staged buffer is the one kept
  }

  int64_t bucket_len(size_t b) const { return buckets[b].end - buckets[b].begin; }

  // Starts the all-reduce of bucket b's next piece.
  void launch_piece(size_t b) {
    const int64_t elem = static_cast<int64_t>(dtype_size(flat.dtype()));
    const int64_t piece = std::max<int64_t>(1, options.message_bytes / elem);
    const int64_t n = std::min(piece, bucket_len(b) - issued[b]);
    // ZeRO too: an all-reduce of the bucket, this rank's part then copied out (bucket_done).
    // Open MPI 4.1's non-blocking reduce-scatter (libnbc: all to rank 0, then scattered) took
    // 10-16x the time of its all-reduce on a 25 MiB bucket here (2-3 ranks), and made ZeRO-1/2
    // steps 3x slower than plain data parallelism.
    requests[b] = comm->iall_reduce_sum(bucket_buffer(b).narrow(0, issued[b], n));
    issued[b] += n;
  }

  void launch(size_t b, bool from_hook) {
    started[b] = Clock::now();
    launch_piece(b);
    running.buckets++;
    running.bytes += bucket_len(b) * static_cast<int64_t>(dtype_size(flat.dtype()));
    running.launched_in_backward += from_hook ? 1 : 0;
    next_launch = b + 1;
  }

  // Every rank starts the same collectives in the same order: a bucket's pieces one after
  // the other, and the next bucket only once the last piece of this one has started.
  bool all_issued(size_t b) const { return issued[b] == bucket_len(b); }
  bool may_launch_next() const { return next_launch == 0 || all_issued(next_launch - 1); }

  void launch_ready() {
    while (next_launch < buckets.size() && missing[next_launch] == 0 && may_launch_next())
      launch(next_launch, true);
  }

  // Completes bucket b's piece in flight (waiting, or only if done when !block); starts the
  // next piece, or finishes the bucket after its last. False if the piece is still in flight.
  bool advance(size_t b, bool block) {
    if (block) {
      comm->wait(requests[b]);
    } else if (!comm->test(requests[b])) {
      return false;
    }
    if (all_issued(b)) {
      bucket_done(b);
    } else {
      launch_piece(b);
    }
    return true;
  }

  // MPI progresses non-blocking collectives only inside MPI calls: test them.
  void progress() {
    for (size_t b = 0; b < next_launch; ++b) {
      while (!done[b] && advance(b, false)) {
      }
    }
    launch_ready();
  }

  void on_grad_ready(size_t i, const Variable& v) {
    EMBER_PROFILE_SCOPE(kCommFamily);
    if (!sync || !communicates()) return;
    EMBER_CHECK(!copied[i], "dist::Reducer: the gradient of parameter ", i, " (shape ",
                shape_str(v.shape()),
                ") became final twice in one synchronized step; run one "
                "backward per micro-step, set_sync(true) only on the last, then finish()");
    progress();  // a bucket seen complete frees its staging buffer before the next is allocated
    copy_in(i, v.grad());
    launch_ready();
    progress();
  }

  // Length of the union of the buckets' [start, completion seen] intervals
  // (buckets start in order, so the intervals are sorted by start).
  double in_flight_seconds() const {
    double total = 0;
    Clock::time_point end{};
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto s = std::max(started[b], end);
      if (finished[b] > s) total += seconds(s, finished[b]);
      end = std::max(end, finished[b]);
    }
    return total;
  }

  void finish_single() {
    for (size_t i = 0; i < params.size(); ++i) has_grad[i] = params[i].grad().defined();
    if (!options.zero) return;
    for (size_t b = 0; b < buckets.size(); ++b) {
      for (size_t i : buckets[b].params) copy_in(i, params[i].grad());
      if (buckets[b].end > buckets[b].begin)  // one rank: its shard is the whole layout
        shard_grad.narrow(0, shard_offsets[b], buckets[b].end - buckets[b].begin).copy_(bucket_buffer(b));
      staging[b] = Tensor();
    }
  }

  void finish() {
    EMBER_PROFILE_SCOPE(kCommFamily);
    NoGradGuard no_grad;
    if (!communicates()) {
      finish_single();
      reset_step();
      return;
    }
    const auto t0 = Clock::now();
    auto issue_rest = [&](size_t b) {  // the pieces of a started bucket not yet started
      while (!all_issued(b)) advance(b, true);
    };
    for (size_t b = next_launch; b < buckets.size(); ++b) {
      if (b > 0) issue_rest(b - 1);
      for (size_t i : buckets[b].params) {
        if (!copied[i]) copy_in(i, params[i].grad());
      }
      launch(b, false);
    }
    if (next_launch > 0) issue_rest(next_launch - 1);
    comm->all_reduce(flags, ReduceOp::Max);
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (!done[b]) advance(b, true);
      if (!options.zero)
        divide_(flat.narrow(0, buckets[b].begin, buckets[b].end - buckets[b].begin), world());
    }
    if (options.zero) divide_(shard_grad, world());
    const auto t1 = Clock::now();
    const std::vector<float> f = flags.to_vector<float>();
    for (size_t i = 0; i < params.size(); ++i) {
      has_grad[i] = f[i] > 0;
      if (options.zero) continue;
      if (has_grad[i]) {
        params[i].set_grad(flat_slice(i));
      } else {
        params[i].zero_grad();
      }
    }
    running.wait_seconds = seconds(t0, t1);
    running.comm_seconds = in_flight_seconds();
    stats = running;
    reset_step();
  }
};

Reducer::Reducer(Communicator& comm, const std::vector<Variable>& params, ReducerOptions options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.comm = &comm;
  s.options = options;
  EMBER_CHECK(options.units.empty() || (options.zero && options.units.size() == params.size()),
              "dist::Reducer: units need zero = true and one unit per parameter (", options.units.size(),
              " for ", params.size(), ")");
  for (size_t given = 0; given < params.size(); ++given) {
    const Variable& p = params[given];
    if (!p.requires_grad()) continue;
    if (!options.units.empty()) s.units.push_back(options.units[given]);
    EMBER_CHECK(p.is_leaf(), "dist::Reducer: parameter ", s.params.size(), " is not a leaf");
    EMBER_CHECK(s.index.emplace(p.impl().get(), s.params.size()).second,
                "dist::Reducer: parameter ", s.params.size(), " appears twice");
    EMBER_CHECK(is_floating(p.dtype()), "dist::Reducer: parameters must be float32 or float64");
    EMBER_CHECK(s.params.empty() || p.dtype() == s.params[0].dtype(),
                "dist::Reducer: parameters must share one dtype (found ",
                dtype_name(s.params[0].dtype()), " and ", dtype_name(p.dtype()), ")");
    s.params.push_back(p);
  }
  const size_t n = s.params.size();
  const DType dtype = n ? s.params[0].dtype() : DType::Float32;
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype));
  s.offset.assign(n, 0);
  s.bucket_of.assign(n, 0);
  std::vector<int64_t> numels;
  for (const Variable& p : s.params) numels.push_back(p.numel());
  // The flat buffer holds the buckets one after the other, each's parameters in its order.
  for (std::vector<size_t>& members : gradient_buckets(numels, elem, options.first_bucket_bytes,
                                                       options.bucket_bytes, s.units)) {
    Bucket b{s.numel, s.numel, std::move(members)};
    for (const size_t k : b.params) {
      s.offset[k] = b.end;
      s.bucket_of[k] = s.buckets.size();
      b.end += numels[k];
    }
    s.numel = b.end;
    s.buckets.push_back(std::move(b));
  }
  EMBER_CHECK(options.message_bytes > 0, "dist::Reducer: message_bytes must be positive");
  EMBER_CHECK(!options.shard_grads || options.zero,
              "dist::Reducer: shard_grads (ZeRO-2) needs zero = true");
  s.flat = Tensor::zeros({options.shard_grads ? 1 : std::max<int64_t>(s.numel, 1)}, dtype);
  s.flags = Tensor::zeros({std::max<int64_t>(static_cast<int64_t>(n), 1)}, DType::Float32);
  s.lay_out_shards();
  // Plain data parallelism keeps no shard: the averaged gradient is the flat buffer (a shard
  // here would cost 1/W of the model's gradients for nothing).
  const int64_t shard_len = options.zero ? s.shard_len : 0;
  s.shard_storage = Tensor::zeros({std::max<int64_t>(shard_len, 1)}, dtype);
  s.shard_grad = s.shard_storage.narrow(0, 0, shard_len);
  s.copied.assign(n, 0);
  s.missing.assign(s.buckets.size(), 0);
  s.requests.assign(s.buckets.size(), Request{});
  s.issued.assign(s.buckets.size(), 0);
  s.done.assign(s.buckets.size(), 0);
  s.staging.assign(s.buckets.size(), Tensor());
  s.started.assign(s.buckets.size(), Clock::time_point{});
  s.finished.assign(s.buckets.size(), Clock::time_point{});
  s.has_grad.assign(n, false);
  s.reset_step();
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < n; ++i) {
    s.params[i].register_post_accumulate_grad_hook([weak, i](Variable& v) {
      if (auto st = weak.lock()) st->on_grad_ready(i, v);
    });
  }
}

Reducer::~Reducer() {
  // Collectives still in flight (finish() never ran, e.g. an error mid-step)
  // write into flat: wait so the buffer outlives them.
  State& s = *state_;
  for (size_t b = 0; b < s.next_launch; ++b) {
    if (s.requests[b].pending()) {
      try {
        s.comm->wait(s.requests[b]);
      } catch (...) {
      }
    }
  }
}

void Reducer::set_sync(bool sync) {
  state_->sync = sync;
}
bool Reducer::sync() const {
  return state_->sync;
}
void Reducer::finish() {
  state_->finish();
}

double Reducer::clip_grad_norm(double max_norm) {
  EMBER_PROFILE_SCOPE(optim::kOptimizerFamily);
  State& s = *state_;
  if (!s.options.zero) return optim::clip_grad_norm(s.params, max_norm);
  NoGradGuard no_grad;
  double local = 0;
  dispatch_float(s.shard_grad.dtype(), "clip_grad_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* d = s.shard_grad.numel() ? s.shard_grad.data<T>() : nullptr;
    const int64_t n = s.shard_grad.numel();
#pragma omp parallel for reduction(+ : local) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) local += static_cast<double>(d[i]) * d[i];
  });
  const double norm = std::sqrt(s.comm->all_reduce(local, ReduceOp::Sum));
  if (max_norm > 0) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0 && s.shard_grad.numel() > 0) kernels::mul_scalar_(s.shard_grad, coef);
  }
  return norm;
}

const ReducerStats& Reducer::stats() const {
  return state_->stats;
}
int64_t Reducer::launched_buckets() const {
  return static_cast<int64_t>(state_->next_launch);
}
const ReducerOptions& Reducer::options() const {
  return state_->options;
}
Communicator& Reducer::comm() const {
  return *state_->comm;
}
const std::vector<Variable>& Reducer::params() const {
  return state_->params;
}
const std::vector<Bucket>& Reducer::buckets() const {
  return state_->buckets;
}
int64_t Reducer::numel() const {
  return state_->numel;
}
const std::vector<bool>& Reducer::has_grad() const {
  return state_->has_grad;
}
int64_t Reducer::shard_begin(int rank) const {
  return state_->shard_starts.at(rank);
}
int64_t Reducer::piece_begin(size_t b, int rank) const {
  return state_->pieces.at(b).at(rank);
}
int64_t Reducer::shard_offset(size_t b) const {
  return state_->shard_offsets.at(b);
}
int64_t Reducer::shard_numel() const {
  return state_->shard_len;
}
size_t Reducer::bucket_of(size_t index) const {
  return state_->bucket_of.at(index);
}
const Tensor& Reducer::shard_grad() const {
  return state_->shard_grad;
}
const Tensor& Reducer::flat() const {
  return state_->flat;
}
const std::vector<int64_t>& Reducer::bucket_shard_counts(size_t b) const {
  return state_->bucket_counts.at(b);
}
int64_t Reducer::held_bytes() const {
  const State& s = *state_;
  int64_t bytes = static_cast<int64_t>(s.flat.nbytes() + s.shard_storage.nbytes());
  for (const Tensor& t : s.staging) bytes += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  return bytes;
}

int64_t Reducer::index_of(const Variable& p) const {
  auto it = state_->index.find(p.impl().get());
  return it == state_->index.end() ? -1 : static_cast<int64_t>(it->second);
}
int64_t Reducer::flat_offset(size_t index) const {
  return state_->offset.at(index);
}

}  // namespace ember::dist
