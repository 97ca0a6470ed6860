// One checkpoint of a run: refused when a parameter is not finite (`latest`
// never moves to diverged weights); rank 0 writes OUT/step_N.h5 with the run
// state of an exact resume (the optimizer hands it its state a tensor at a
// time as it writes them: ZeroAdamW gathers each moment from the ranks),
// points OUT/latest at it and prunes, while the others wait at a barrier. ZeRO-3 streams the parameters too, a unit (block)
// at a time: every rank gathers the unit and checks it is finite, rank 0
// writes it, all free it, so a save holds two units (one prefetched) beyond
// the shard, not 4P on every rank.
#include <filesystem>
#include <unordered_map>

#include "apps/train/finite_parameters.h"
#include "apps/train/pipeline_run.h"
#include "apps/train/rl_run.h"
#include "apps/train/run_files.h"
#include "apps/train/run.h"
#include "apps/train/run_paths.h"
#include "apps/train/step_phases.h"
#include "apps/train/tensor_parallel_run.h"
#include "core/profiler.h"
#include "nn/adapters/adapters.h"

namespace ember::apps {

namespace {

// The run state of an exact resume (the checkpoint's /train; docs/formats.md).
std::string train_state(const TrainRun& run, int64_t at_step) {
  nlohmann::json st{{"step", at_step},
                    {"tokens_seen", run.tokens_seen},
                    {"dropout_offset", run.model->dropout_generator().offset},
                    {"dropout_seed", run.model->dropout_generator().seed},
                    {"world_size", run.data_world},  // the global batch's data ranks
                    {"options", options_to_json(run.o)},
                    {"data_fingerprint", run.data_files}};
  if (run.o.finetune) st["finetune"] = {{"base", run.finetune_base}};  // marks a fine-tuning run
  if (run.o.align) st["align"] = {{"pairs", run.pairs->size()}};  // and an alignment run
  if (run.o.reward) st["reward"] = {{"pairs", run.pairs->size()}};  // or a reward model's run
  if (run.o.rl) st["rl"] = {{"algo", run.o.algo}};  // or an RL run
  return st.dump();
}

// Refused when a parameter is not finite (`latest` never moves to diverged weights).
void check_finite(const dist::Communicator& comm, int64_t at_step,
                  const std::vector<std::pair<std::string, Variable>>& named) {
  agreed(comm, [&] {
    const std::string bad = first_non_finite_parameter(named);
    EMBER_CHECK(bad.empty(), "step ", at_step, ": parameter ", bad,
                " is not finite (the run diverged); no checkpoint written");
  });
}

// ZeRO-3: the model's tensors a unit at a time (every rank runs it; put is empty off rank 0).
void stream_sharded_model(TrainRun& run, int64_t at_step, const nn::TensorPut& put) {
  std::unordered_map<const Storage*, std::string> name_of;
  for (const auto& [name, v] : run.model->named_parameters()) name_of.emplace(v.data().storage().get(), name);
  run.optimization.sharded->for_each_unit([&](int64_t, const std::vector<Variable>& params) {
    std::vector<std::pair<std::string, Variable>> named;
    for (const Variable& p : params) named.emplace_back(name_of.at(p.data().storage().get()), p);
    check_finite(run.comm, at_step, named);
    if (put) {
      for (const auto& [name, p] : named) put(name, p.data());
    }
  });
}

}  // namespace

nlohmann::json align_config(const TrainOptions& o) {
  nlohmann::json j = {{"loss", o.loss}, {"beta", o.beta}};
  if (o.loss == "dpo") j["label_smoothing"] = o.label_smoothing;
  if (o.loss == "simpo") j["simpo_gamma"] = o.simpo_gamma;
  j["sft_weight"] = o.sft_weight;
  if (o.loss == "dpo" || o.loss == "ipo") j["reference"] = o.ref.empty() ? "" : absolute_path(o.ref);
  return j;
}

nlohmann::json reward_config(const TrainOptions& o) {
  return {{"center_rewards", o.center_rewards}};
}

std::string save_checkpoint(TrainRun& run, int64_t at_step) {
  EMBER_PROFILE_PHASE(kCheckpointPhase);
  const TrainOptions& o = run.o;
  const optim::Optimizer& opt = *run.optimization.optimizer;
  const std::string name = checkpoint_name(at_step);
  const bool sharded = run.optimization.sharded != nullptr;
  // A LoRA run's frozen base was checked when it was read and never changes.
  if (!sharded) {
    check_finite(run.comm, at_step,
                 run.cfg.lora ? nn::trainable_parameters(*run.model) : run.model->named_parameters());
  }
  nn::Checkpoint c;
  // --tp: every tensor rank gathers each whole tensor from the shards (collective), rank 0
  // writes them as they come, the parameters' then the moments'. --pp: the leader of each later
  // stage sends its stage's whole tensors to rank 0 (apps/train/pipeline_run.h), which writes
  // them after its own. The optimizer state goes to rank 0 a tensor at a time while it writes
  // them (ZeRO: gathered from every rank, so the others take part with no sink).
  const bool layout = run.tp_group || run.pp_group;
  if (!run.root) {
    if (sharded) stream_sharded_model(run, at_step, {});
    send_param_steps(run, opt.param_steps());
    if (layout) {
      gather_model(run, send_stage_tensors(run));
      end_stage_tensors(run);
    }
    opt.stream_state(layout ? gathering_sink(run, send_stage_tensors(run)) : optim::Optimizer::StateSink());
    if (layout) end_stage_tensors(run);
    run.comm.barrier();
    return name;
  }
  c.optim_param_steps = opt.param_steps();
  c.optim_param_steps.merge(receive_param_steps(run));
  c.optim_stream = [&run, &opt, layout](const nn::TensorPut& put) {
    opt.stream_state(layout ? gathering_sink(run, put) : optim::Optimizer::StateSink(put));
    receive_stage_tensors(run, put);
  };
  c.config = run.cfg;
  if (run.o.align) c.config.align = align_config(run.o).dump();
  if (run.o.reward) c.config.reward = reward_config(run.o).dump();
  if (run.o.rl) c.config.rl = rl_config(run.o).dump();
  if (sharded) {
    c.model_stream = [&run, at_step](const nn::TensorPut& put) { stream_sharded_model(run, at_step, put); };
  } else if (layout) {
    c.model_stream = [&run](const nn::TensorPut& put) {
      gather_model(run, put);
      receive_stage_tensors(run, put);
    };
  } else if (!run.cfg.lora) {
    c.model = run.model->state_dict();
  } else {  // LoRA: the trained tensors (--tp: gathered whole above)
    for (const auto& [tensor, v] : nn::trainable_parameters(*run.model))
      c.model.emplace(tensor, v.data());
  }
  if (run.cfg.lora) {  // naming the base (docs/formats.md#fine-tune-checkpoints); any layout
    c.base = run.finetune_base;
    c.base_sha256 = run.finetune_base_sha256;
  }
  c.optim_step = opt.steps();
  c.train_step = at_step;
  c.train_state = train_state(run, at_step);
  if (run.tokenizer) c.tokenizer_json = run.tokenizer->to_json();
  nn::write_checkpoint((std::filesystem::path(o.out) / name).string(), c);
  write_latest(o.out, name);
  prune_checkpoints(o.out, o.keep, o.keep_every);
  run.comm.barrier();
  return name;
}

}  // namespace ember::apps
