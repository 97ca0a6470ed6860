// The model of an `ember finetune` run (SPEC.md section 9). A new run loads the base's weights,
// grows the vocabulary by the rows --add-chat-tokens needs (nn::add_vocab_rows), then either
// trains every parameter (--full: the grown model merged into a plain one) or adds LoRA
// adapters drawn from --seed over a base kept as --quantize says (nn::add_adapters) and trains
// only nn::trainable_parameters. A resumed LoRA run rebuilds its model from its checkpoint
// (nn::model_from_checkpoint: the base, checked against its sha256, and the trained tensors).
// The base's weights are read tensor by tensor into the model: no second float32 copy, so the
// peak memory of a QLoRA run is about the float32 model's, before its blocks go to NF4.
#include "apps/train/run.h"
#include "autograd/grad_mode.h"
#include "core/io/hdf5_file.h"
#include "core/io/sha256.h"
#include "nn/adapters.h"

namespace ember::apps {
namespace {

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
  auto model = std::make_unique<nn::Transformer>(nn::merged_config(grown.config()), seed);
  model->load_state_dict(nn::merged_state_dict(grown));
  return model;
}

// The base's /model tensors into model's parameters one at a time: exactly its parameter
// names, each of its shape, finite (as nn::check_model_tensors checks a whole checkpoint).
void load_base_weights(nn::Transformer& model, const std::string& path) {
  const H5File f(path, H5File::Mode::Read);
  const auto params = model.named_parameters();
  const size_t stored = f.list("/model").size();
  EMBER_CHECK(stored == params.size(), path, ": /model holds ", stored,
              " tensors, but the model its config describes has ", params.size(), " parameters");
  NoGradGuard no_grad;
  for (const auto& [name, v] : params) {
    const std::string where = path + ": tensor /model/" + name;
    EMBER_CHECK(f.exists("/model/" + name), path, ": missing tensor /model/", name);
    const Tensor t = f.read_tensor("/model/" + name);
    EMBER_CHECK(t.shape() == v.shape(), where, " has shape ", shape_str(t.shape()), ", expected ",
                shape_str(v.shape()), " from the checkpoint's config");
    nn::check_finite(t, where);
    v.data().copy_(t);
  }
}

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
    agreed(run.comm, [&] { run.model = nn::model_from_checkpoint(run.start, run.start_path); });
    run.model->train();
    run.finetune_base_sha256 = run.start.base_sha256;
  } else {
    run.model = std::make_unique<nn::Transformer>(run.cfg, o.seed);
    if (o.resume.empty()) {
      agreed(run.comm, [&] { load_base_weights(*run.model, run.start_path); });
    } else {
      run.model->load_state_dict(run.start.model);  // a resumed --full run's checkpoint
    }
    if (run.added_rows > 0) nn::add_vocab_rows(*run.model, run.added_rows, o.seed);
    if (o.full && run.added_rows > 0) run.model = grown_plain_model(*run.model, o.seed);
    if (!o.full) {
      nn::add_adapters(*run.model, lora_config(o), o.quantize, o.seed);
      agreed(run.comm, [&] { run.finetune_base_sha256 = sha256_file(run.finetune_base); });
    }
  }
  run.cfg = run.model->config();
  return o.full ? run.model->named_parameters() : nn::trainable_parameters(*run.model);
}

}  // namespace ember::apps
