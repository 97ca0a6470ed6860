// dist::ZeroAdamW: ZeRO stage 1. AdamW whose moments are sharded across
// ranks: each rank keeps exp_avg / exp_avg_sq for its shard of the Reducer's
// flat buffer only (~1/W of the state), updates that slice with the
// arithmetic of optim::AdamW (optim::adamw_update_span) from the averaged
// gradient shard the Reducer kept, then all-gathers the parameters.
// Its state_dict is the full, world-size independent one of optim::AdamW.
// Per-parameter update counts are kept whole on every rank: a parameter is
// counted when the Reducer's has_grad (agreed by all ranks) says some rank
// had its gradient, exactly when plain data-parallel AdamW updates it.
// Over a Reducer with shard_grads it is ZeRO-2: the same update, the
// parameters all-gathered one bucket at a time. With set_parameter_shard it
// is ZeRO-3: the update goes to the parameters' shard (dist::ShardedParameters
// keeps it) and nothing is gathered here.
#pragma once
#include <functional>

#include "dist/reducer.h"
#include "optim/adamw.h"

namespace ember::dist {

class ZeroAdamW : public optim::Optimizer {
 public:
  // reducer: built with options.zero = true over (at least) every parameter
  // in groups; it must outlive this optimizer.
  ZeroAdamW(Reducer& reducer, std::vector<optim::ParamGroup> groups,
            optim::AdamWOptions options = {});

  // After reducer.finish() (and reducer.clip_grad_norm): updates this rank's
  // shard, then all-gathers the parameters. Collective.
  void step(double lr, double grad_scale = 1.0) override;
  // Full moments under optim::AdamW's keys ("<name>/exp_avg", ...), the same
  // for every world size. Collective: every rank calls it and gets them all.
  std::map<std::string, Tensor> state_dict() const override;
  // The same tensors one parameter at a time, gathered to `root` only, which
  // calls sink(key, tensor) for each (the others pass an empty sink): a
  // checkpoint is written while at most one parameter's moment is held whole.
  // Collective.
  void gather_state(int root, const StateSink& sink) const;
  // gather_state to rank 0 (what a checkpoint writer streams). Collective.
  void stream_state(const StateSink& sink) const override { gather_state(0, sink); }
  // load_state_dict (optim::Optimizer's) takes the full state, as
  // state_dict gives or optim::AdamW saves; each rank keeps its shard. Not
  // collective: every rank passes the same state.

  // ZeRO-3: parameters live as this rank's shard of the Reducer's layout
  // (shard_numel() elements); step() updates it instead of the parameters.
  void set_parameter_shard(const Tensor& shard);

  const optim::AdamWOptions& options() const { return options_; }
  // Bytes of optimizer state held by this rank.
  int64_t state_bytes() const;

 private:
  void load_tensors(const StateSource& get) override;
  Tensor gather_shard(const Tensor& shard) const;
  void gather_parameters();
  void gather_parameters_by_bucket();
  void gather_range(const Tensor& buffer, int64_t begin, const std::vector<int64_t>& counts,
                    const std::vector<size_t>& params_in_range);

  // Part of one parameter inside this rank's shard.
  struct Segment {
    size_t group, index;  // the parameter: groups_[group].params[index]
    size_t managed;       // its index among the reducer's parameters
    int64_t flat_offset;  // of the parameter in the flat buffer
    int64_t begin, end;   // flat range of the part, within the shard
    int64_t local;        // where the part starts in this rank's shard
  };
  // A parameter the Reducer manages (all of them, not only this shard's).
  struct Managed {
    size_t group, index, managed;
  };

  Reducer& reducer_;
  optim::AdamWOptions options_;
  int64_t shard_len_ = 0;
  Tensor exp_avg_, exp_avg_sq_;  // this rank's shard (at least one element allocated)
  Tensor param_shard_;           // ZeRO-3 only
  std::vector<Segment> segments_;
  std::vector<Managed> managed_;
};

}  // namespace ember::dist
