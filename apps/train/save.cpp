// One checkpoint of a run: refused when a parameter is not finite (`latest`
// never moves to diverged weights); rank 0 writes OUT/step_N.h5 with the run
// state of an exact resume (ZeroAdamW gathering the moments to it a parameter
// at a time as it writes them; ZeRO-3 gathers the parameters for the save),
// points OUT/latest at it and prunes, while the others wait at a barrier.
#include <filesystem>

#include "apps/train/finite_parameters.h"
#include "apps/train/run_files.h"
#include "apps/train/run.h"
#include "apps/train/step_phases.h"
#include "core/profiler.h"
#include "dist/zero_adamw.h"
#include "nn/adapters.h"

namespace ember::apps {

namespace {

// The run state of an exact resume (the checkpoint's /train; docs/formats.md).
std::string train_state(const TrainRun& run, int64_t at_step) {
  nlohmann::json st{{"step", at_step},
                    {"tokens_seen", run.tokens_seen},
                    {"dropout_offset", run.model->dropout_generator().offset},
                    {"world_size", run.world},
                    {"options", options_to_json(run.o)},
                    {"data_fingerprint", run.data_files}};
  if (run.o.finetune) st["finetune"] = {{"base", run.finetune_base}};  // marks a fine-tuning run
  return st.dump();
}

}  // namespace

std::string save_checkpoint(TrainRun& run, int64_t at_step) {
  EMBER_PROFILE_PHASE(kCheckpointPhase);
  const TrainOptions& o = run.o;
  const optim::Optimizer& opt = *run.optimization.optimizer;
  const std::string name = checkpoint_name(at_step);
  const HeldParameters held(run.optimization);  // ZeRO-3: every parameter gathered, then freed
  agreed(run.comm, [&] {
    // A LoRA run's frozen base was checked when it was read and never changes.
    const std::string bad = first_non_finite_parameter(
        run.cfg.lora ? nn::trainable_parameters(*run.model) : run.model->named_parameters());
    EMBER_CHECK(bad.empty(), "step ", at_step, ": parameter ", bad,
                " is not finite (the run diverged); no checkpoint written");
  });
  nn::Checkpoint c;
  // ZeRO: the moments are gathered to rank 0 one parameter at a time while it writes them.
  const auto* zero = dynamic_cast<const dist::ZeroAdamW*>(&opt);
  if (!run.root) {
    if (zero) zero->gather_state(0, {});
    run.comm.barrier();
    return name;
  }
  if (zero) c.optim_stream = [zero](const nn::TensorPut& put) { zero->gather_state(0, put); };
  c.config = run.cfg;
  if (!run.cfg.lora) {
    c.model = run.model->state_dict();
  } else {  // a LoRA fine-tune: the trained tensors, naming the base (SPEC.md section 9)
    for (const auto& [tensor, v] : nn::trainable_parameters(*run.model))
      c.model.emplace(tensor, v.data());
    c.base = run.finetune_base;
    c.base_sha256 = run.finetune_base_sha256;
  }
  if (!zero) c.optim = opt.state_dict();
  c.optim_step = opt.steps();
  c.optim_param_steps = opt.param_steps();
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
