// An `ember finetune` run's model (docs/model.md#fine-tuning). A new run loads the base's weights,
// grows the vocabulary by the rows --add-chat-tokens needs (nn::add_vocab_rows), then either
// trains every parameter (--full: the grown model merged into a plain one) or adds LoRA
// adapters drawn from --seed over a base kept as --quantize says (nn::add_adapters) and trains
// only nn::trainable_parameters. A resumed LoRA run rebuilds its model from its checkpoint
// (nn::model_from_checkpoint: the base, checked against its sha256, and the trained tensors).
// ember reward adds the score head score.weight (drawn from --seed, always trained) last.
// The base's weights are read tensor by tensor into a model built without initializing them
// (nn::load_model_weights); with --quantize each block goes to NF4 as soon as it is read, so
// the float32 blocks are never all resident. Under --tp every rank builds its shards of that
// model: each tensor read whole and cut, each adapter drawn whole and cut; with --pp each rank
// its stage's part (nn::PipelineStage): the same tensors, adapters included, as one process's.
#include "apps/train/pipeline_run.h"
#include "apps/train/rl_run.h"
#include "apps/train/run.h"
#include "apps/train/tensor_parallel_run.h"
#include "autograd/grad_mode.h"
#include "core/io/hdf5_file.h"
#include "core/io/sha256.h"
#include "nn/adapters/adapters.h"
#include "nn/skip_init.h"

namespace ember::apps {
namespace {

// The score head's draws: a stream of --seed apart from the adapters' (Generator(seed)).
constexpr uint64_t kScoreHeadStream = 0x5c09e8ead5eedull;

nn::LoRAConfig lora_config(const TrainOptions& o) {
  nn::LoRAConfig l;
  l.r = o.lora_r;
  l.alpha = o.lora_alpha;
  l.dropout = o.lora_dropout;
  l.targets = nn::parse_lora_targets(o.lora_targets);
  return l;
}

// --full with --add-chat-tokens: the base with its rows added, as a plain model.
std::unique_ptr<nn::Transformer> grown_plain_model(const nn::Transformer& grown, uint64_t seed) {
  std::unique_ptr<nn::Transformer> model;
  {
    nn::SkipInitGuard skip;  // every tensor is loaded below
    model = std::make_unique<nn::Transformer>(nn::merged_config(grown.config()), seed);
  }
  model->load_state_dict(nn::merged_state_dict(grown));
  return model;
}

// --tp: the tensor group (every rank's model holds its shards of one process's).
nn::TensorParallel tensor_parallel(const TrainRun& run) { return nn::TensorParallel{run.tp_group.get()}; }

}  // namespace

nn::Checkpoint read_base_without_weights(const std::string& path) {
  nn::Checkpoint c;
  c.config = nn::read_checkpoint_config(path);
  const H5File f(path, H5File::Mode::Read);
  if (f.exists("/tokenizer/json")) c.tokenizer_json = f.read_string("/tokenizer/json");
  return c;
}

std::vector<std::pair<std::string, Variable>> build_finetune_model(TrainRun& run) {
  const TrainOptions& o = run.o;
  const bool resumed_lora = !o.resume.empty() && run.start.config.lora;
  if (resumed_lora) {
    // --base: the base moved, read from there (checked by the sha256 the checkpoint records).
    const std::string moved_base = o.base.empty() ? "" : run.finetune_base;
    agreed(run.comm, [&] {
      run.model = nn::model_from_checkpoint(run.start, run.start_path, moved_base, tensor_parallel(run), run.stage);
    });
    run.model->train();
    run.finetune_base_sha256 = run.start.base_sha256;
  } else {
    if (o.resume.empty()) {
      const std::string quantize = o.full ? "none" : o.quantize;
      agreed(run.comm, [&] {
        run.model = nn::load_model_weights(run.cfg, o.seed, run.start_path, quantize, tensor_parallel(run), run.stage);
      });
    } else {  // a resumed --full run's checkpoint (--tp, --pp: this rank's shards of its stage's tensors)
      run.model = std::make_unique<nn::Transformer>(run.cfg, o.seed, DType::Float32, tensor_parallel(run), run.stage);
      run.model->load_state_dict(shard_state(run, stage_state(run, run.start.model)));
    }
    if (run.added_rows > 0) nn::add_vocab_rows(*run.model, run.added_rows, o.seed);
    if (o.full && run.added_rows > 0) run.model = grown_plain_model(*run.model, o.seed);
    if (!o.full) {
      // --tp: a model it cannot split (LoRA on MoE) fails every rank with one line.
      agreed(run.comm, [&] { nn::add_adapters(*run.model, lora_config(o), o.quantize, o.seed); });
      // Only rank 0 writes checkpoints (the one place base_sha256 is used).
      agreed(run.comm, [&] {
        if (run.root) run.finetune_base_sha256 = sha256_file(run.finetune_base);
      });
    }
    // ember reward: the head, after the adapters froze the rest (a resumed --full run's model
    // was built with it from its config).
    if (o.reward && !run.model->has_score_head()) {
      Generator head(o.seed ^ kScoreHeadStream);
      run.model->add_score_head(head, reward_config(o).dump());
    }
    // ember rl: the config's "rl" and, for ppo, the value head, trained like the score head.
    if (o.rl && run.model->config().rl.empty()) run.model->set_rl(rl_config(o).dump(), new_value_head(run));
  }
  run.cfg = run.model->config();
  return o.full ? run.model->named_parameters() : nn::trainable_parameters(*run.model);
}

}  // namespace ember::apps
