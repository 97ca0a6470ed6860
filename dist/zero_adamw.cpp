// ZeroAdamW: the shard's segments (parameter parts inside this rank's flat
// range), the per-parameter update counts, the sharded update with
// optim::adamw_update_span, the parameter all-gather (ZeRO-1 through the
// Reducer's flat buffer, ZeRO-2 one bucket at a time), and the gather / slice
// of full moments for checkpoints.
#include "dist/zero_adamw.h"

#include "autograd/grad_mode.h"
#include "optim/optimizer.h"

namespace ember::dist {

ZeroAdamW::ZeroAdamW(Reducer& reducer, std::vector<optim::ParamGroup> groups,
                     optim::AdamWOptions options)
    : Optimizer(std::move(groups)), reducer_(reducer), options_(options) {
  EMBER_CHECK(reducer.options().zero,
              "ZeroAdamW: the Reducer must be built with ReducerOptions::zero = true");
  const int rank = reducer.comm().rank();
  shard_len_ = reducer.shard_numel();
  const DType dtype = reducer.flat().dtype();
  const int64_t len = shard_len_;
  exp_avg_ = Tensor::zeros({std::max<int64_t>(len, 1)}, dtype);
  exp_avg_sq_ = Tensor::zeros({std::max<int64_t>(len, 1)}, dtype);
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const optim::ParamGroup& g = groups_[gi];
    for (size_t i = 0; i < g.params.size(); ++i) {
      const Variable& p = g.params[i];
      if (!p.requires_grad()) continue;
      const int64_t managed = reducer.index_of(p);
      EMBER_CHECK(managed >= 0, "ZeroAdamW: parameter ", param_key(gi, i),
                  " is not in the Reducer");
      managed_.push_back({gi, i, static_cast<size_t>(managed)});
      EMBER_CHECK(p.data().is_contiguous(), "ZeroAdamW: parameter data must be contiguous");
      const int64_t off = reducer.flat_offset(static_cast<size_t>(managed));
      const size_t b = reducer.bucket_of(static_cast<size_t>(managed));
      const int64_t piece = reducer.piece_begin(b, rank);
      const int64_t begin = std::max(off, piece);
      const int64_t end = std::min(off + p.numel(), reducer.piece_begin(b, rank + 1));
      if (begin < end) {
        segments_.push_back({gi, i, static_cast<size_t>(managed), off, begin, end,
                             reducer.shard_offset(b) + begin - piece});
      }
    }
  }
}

void ZeroAdamW::step(double lr, double grad_scale) {
  EMBER_PROFILE_SCOPE(optim::kOptimizerFamily);
  ++step_;
  NoGradGuard no_grad;
  const Tensor& grad = reducer_.shard_grad();
  const std::vector<bool>& has_grad = reducer_.has_grad();
  // As AdamW: a parameter with no gradient on any rank is neither updated nor
  // counted. Every rank counts every parameter, so each holds all counts.
  for (const Managed& p : managed_) {
    if (has_grad[p.managed]) ++param_step_[p.group][p.index];
  }
  for (const Segment& s : segments_) {
    if (!has_grad[s.managed]) continue;
    const optim::ParamGroup& group = groups_[s.group];
    const Tensor data = param_shard_.defined() ? param_shard_ : group.params[s.index].data();
    const int64_t at = s.local;
    const int64_t in_data = param_shard_.defined() ? at : s.begin - s.flat_offset;
    dispatch_float(data.dtype(), "ZeroAdamW", [&](auto tag) {
      using T = decltype(tag);
      optim::adamw_update_span<T>(data.data<T>() + in_data, grad.data<T>() + at,
                                  exp_avg_.data<T>() + at, exp_avg_sq_.data<T>() + at,
                                  s.end - s.begin, lr * group.lr_scale, group.weight_decay,
                                  options_, param_step_[s.group][s.index], grad_scale);
    });
    data.bump_version();
  }
  if (reducer_.comm().world_size() == 1 || param_shard_.defined()) return;
  if (reducer_.options().shard_grads) {
    gather_parameters_by_bucket();
  } else {
    gather_parameters();
  }
}

// Each rank writes its shard of every managed parameter into `buffer` (the
// flat range [begin, begin + buffer.numel())), gathers the others' and every
// parameter of the range is copied back.
void ZeroAdamW::gather_range(const Tensor& buffer, int64_t begin, const std::vector<int64_t>& counts,
                             const std::vector<size_t>& params_in_range) {
  const std::vector<Variable>& params = reducer_.params();
  const int rank = reducer_.comm().rank();
  for (size_t k : params_in_range) {
    const int64_t off = reducer_.flat_offset(k), n = params[k].numel();
    const size_t b = reducer_.bucket_of(k);
    const int64_t lo = std::max(off, reducer_.piece_begin(b, rank));
    const int64_t hi = std::min(off + n, reducer_.piece_begin(b, rank + 1));
    if (lo >= hi) continue;
    buffer.narrow(0, lo - begin, hi - lo).copy_(params[k].data().reshape({n}).narrow(0, lo - off, hi - lo));
  }
  reducer_.comm().all_gather_in_place(buffer, counts);
  for (size_t k : params_in_range) {
    params[k].data().copy_(
        buffer.narrow(0, reducer_.flat_offset(k) - begin, params[k].numel()).view(params[k].shape()));
  }
}

// ZeRO-2: a bucket-sized buffer at a time, so no full-size buffer is kept.
void ZeroAdamW::gather_parameters_by_bucket() {
  const std::vector<Bucket>& buckets = reducer_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Tensor buffer = Tensor::empty({buckets[b].end - buckets[b].begin}, reducer_.flat().dtype());
    gather_range(buffer, buckets[b].begin, reducer_.bucket_shard_counts(b), buckets[b].params);
  }
}

// ZeRO-1: through the Reducer's flat buffer, all parameters at once.
void ZeroAdamW::gather_parameters() {
  Communicator& comm = reducer_.comm();
  std::vector<int64_t> counts(comm.world_size());
  for (int r = 0; r < comm.world_size(); ++r) {
    counts[r] = reducer_.shard_begin(r + 1) - reducer_.shard_begin(r);
  }
  std::vector<size_t> all(reducer_.params().size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  gather_range(reducer_.flat(), 0, counts, all);
}

// The whole flat layout from every rank's shard, bucket by bucket. Collective.
Tensor ZeroAdamW::gather_shard(const Tensor& shard) const {
  Communicator& comm = reducer_.comm();
  const std::vector<Bucket>& buckets = reducer_.buckets();
  Tensor full = Tensor::zeros({std::max<int64_t>(reducer_.numel(), 1)}, shard.dtype());
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t piece = reducer_.piece_begin(b, comm.rank());
    const int64_t n = reducer_.piece_begin(b, comm.rank() + 1) - piece;
    if (n > 0) full.narrow(0, piece, n).copy_(shard.narrow(0, reducer_.shard_offset(b), n));
    const int64_t len = buckets[b].end - buckets[b].begin;
    if (len > 0) comm.all_gather_in_place(full.narrow(0, buckets[b].begin, len), reducer_.bucket_shard_counts(b));
  }
  return full;
}

std::map<std::string, Tensor> ZeroAdamW::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto [suffix, shard] :
       {std::pair{"/exp_avg", &exp_avg_}, std::pair{"/exp_avg_sq", &exp_avg_sq_}}) {
    const Tensor full = gather_shard(*shard);
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
        const Variable& p = groups_[gi].params[i];
        const int64_t managed = reducer_.index_of(p);
        if (managed < 0) continue;
        out[param_key(gi, i) + suffix] =
            full.narrow(0, reducer_.flat_offset(static_cast<size_t>(managed)), p.numel())
                .view(p.shape());
      }
    }
  }
  return out;
}

void ZeroAdamW::gather_state(int root, const StateSink& sink) const {
  Communicator& comm = reducer_.comm();
  const bool is_root = comm.rank() == root;
  std::vector<int64_t> counts(comm.world_size());
  for (const Managed& m : managed_) {
    const Variable& p = groups_[m.group].params[m.index];
    const int64_t off = reducer_.flat_offset(m.managed), n = p.numel();
    // Rank r holds the part of [off, off + n) inside its piece of the parameter's bucket
    // (one range, maybe empty; the pieces follow rank order).
    const size_t b = reducer_.bucket_of(m.managed);
    for (int r = 0; r < comm.world_size(); ++r) {
      const int64_t lo = std::max(off, reducer_.piece_begin(b, r));
      const int64_t hi = std::min(off + n, reducer_.piece_begin(b, r + 1));
      counts[r] = std::max<int64_t>(hi - lo, 0);
    }
    const int64_t mine = counts[comm.rank()];
    const int64_t piece = reducer_.piece_begin(b, comm.rank());
    const int64_t at = reducer_.shard_offset(b) + std::max(off, piece) - piece;
    for (auto [suffix, shard] :
         {std::pair{"/exp_avg", &exp_avg_}, std::pair{"/exp_avg_sq", &exp_avg_sq_}}) {
      const Tensor part = mine > 0 ? shard->narrow(0, at, mine) : Tensor::empty({0}, shard->dtype());
      const Tensor full = is_root ? Tensor::empty({n}, shard->dtype()) : Tensor();
      comm.gather(part, full, counts, root);
      if (is_root) sink(param_key(m.group, m.index) + suffix, full.view(p.shape()));
    }
  }
}

void ZeroAdamW::load_tensors(const StateSource& get) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const Variable& p = groups_[gi].params[i];
      if (reducer_.index_of(p) < 0) continue;
      for (auto [suffix, shard] :
           {std::pair{"/exp_avg", &exp_avg_}, std::pair{"/exp_avg_sq", &exp_avg_sq_}}) {
        const Tensor t = get(param_key(gi, i) + suffix);
        EMBER_CHECK(t.defined(), "AdamW state: missing ", param_key(gi, i), suffix);
        EMBER_CHECK(t.shape() == p.shape(), "AdamW state: ", param_key(gi, i), suffix,
                    " has shape ", shape_str(t.shape()), " but the parameter has shape ",
                    shape_str(p.shape()));
        for (const Segment& s : segments_) {
          if (s.group != gi || s.index != i) continue;
          shard->narrow(0, s.local, s.end - s.begin)
              .copy_(t.reshape({p.numel()})
                         .narrow(0, s.begin - s.flat_offset, s.end - s.begin));
        }
      }
    }
  }
}

int64_t ZeroAdamW::state_bytes() const {
  return 2 * shard_len_ * static_cast<int64_t>(dtype_size(exp_avg_.dtype()));
}

void ZeroAdamW::set_parameter_shard(const Tensor& shard) {
  EMBER_CHECK(shard.dim() == 1 && shard.numel() >= shard_len_ && shard.is_contiguous() &&
                  shard.dtype() == exp_avg_.dtype(),
              "ZeroAdamW::set_parameter_shard: expected a contiguous 1-d ", dtype_name(exp_avg_.dtype()),
              " tensor of ", shard_len_, " elements, got ", shape_str(shard.shape()));
  param_shard_ = shard;
}

}  // namespace ember::dist
