// add_adapters, add_vocab_rows, trainable_parameters and the merge. The
// model's projections are found by walking its module tree (children named
// q_proj ... down_proj under model.layers, and lm_head) and swapped in place
// with Module::replace_module, so every parameter keeps its name (docs/model.md#parameter-names).
#include "nn/adapters/adapters.h"

#include <algorithm>
#include <functional>

#include "core/kernels/elementwise.h"
#include "nn/adapters/lora.h"
#include "nn/adapters/nf4_linear.h"
#include "nn/tensor_parallel.h"
#include "nn/parallel_plan.h"

namespace ember::nn {
namespace {

// The short target name of a block projection child ("" for any other child).
std::string projection_target(const std::string& child_name) {
  static const std::map<std::string, std::string> kNames{
      {"q_proj", "q"},       {"k_proj", "k"},   {"v_proj", "v"},      {"o_proj", "o"},
      {"gate_proj", "gate"}, {"up_proj", "up"}, {"down_proj", "down"}};
  const auto it = kNames.find(child_name);
  return it == kNames.end() ? "" : it->second;
}

using Visit = std::function<void(Module& parent, const std::string& name, const std::string& path)>;

// f(parent, child name, child path) for every module below m, depth first in registration
// order; f may replace the child, and the walk then descends into the replacement.
void walk(Module& m, const std::string& prefix, const Visit& f) {
  for (size_t i = 0; i < m.children().size(); ++i) {
    const std::string name = m.children()[i].first;
    f(m, name, prefix + name);
    walk(*m.children()[i].second, prefix + name + ".", f);
  }
}

const std::shared_ptr<Module>& child_ptr(const Module& parent, const std::string& name) {
  for (const auto& [n, c] : parent.children()) {
    if (n == name) return c;
  }
  throw Error("no module \"" + name + "\"");
}

Module& child(const Module& parent, const std::string& name) {
  return *child_ptr(parent, name);
}

// Under tensor parallelism: how the projection `name` (its weight's parameter name) is split,
// and the whole [out, in] of its base's shard [out, in].
struct TargetSplit {
  TensorSplit split = TensorSplit::Whole;
  LoRAWholeSize whole;
};

// A LoRALinear over the Linear or Nf4Linear base (null for any other module), its adapters
// drawn at the whole size.
std::shared_ptr<LoRALinear> wrap_in_lora(const std::shared_ptr<Module>& base,
                                         const LoRAOptions& options, Generator& gen,
                                         const std::shared_ptr<Generator>& dropout_gen,
                                         DType dtype, LoRAWholeSize whole = {}) {
  if (auto linear = std::dynamic_pointer_cast<Linear>(base)) {
    return std::make_shared<LoRALinear>(linear, options, gen, dropout_gen, whole);
  }
  if (auto nf4 = std::dynamic_pointer_cast<Nf4Linear>(base)) {
    return std::make_shared<LoRALinear>(nf4, options, gen, dropout_gen, dtype, whole);
  }
  return nullptr;
}

// The split of a target's base (`path`: its module's name) and the whole size of its shard.
TargetSplit target_split(const Module& base, const std::string& path, const TensorParallel& tp,
                         int64_t vocab_size) {
  TargetSplit t;
  if (!tp.active()) return t;
  t.split = tensor_split(path + ".weight");
  int64_t out = 0, in = 0;
  if (const auto* linear = dynamic_cast<const Linear*>(&base)) {
    out = linear->weight().size(0), in = linear->weight().size(1);
  } else if (const auto* nf4 = dynamic_cast<const Nf4Linear*>(&base)) {
    out = nf4->out_features(), in = nf4->in_features();
  }
  t.whole = {t.split == TensorSplit::Rows ? out * tp.size() : out,
             t.split == TensorSplit::Columns ? in * tp.size() : in};
  if (t.split == TensorSplit::VocabRows) t.whole.out = vocab_size;
  return t;
}

// Under tensor parallelism: the adapters of `adapter` (module `path`), drawn whole, cut to
// this rank's shards (nn/parallel_plan.h's rules) and run as their base is split.
void shard_adapter(LoRAAdapter& adapter, const std::string& path, const TensorParallel& tp,
                   TensorSplit base_split, int64_t whole_in) {
  if (!tp.active()) return;
  for (const auto& [name, p] : adapter.named_parameters()) {
    if (name.rfind("lora_", 0) != 0) continue;
    p.set_data(tensor_shard(p.data(), tensor_split(path + "." + name), tp.rank(), tp.size()));
  }
  adapter.set_tensor_parallel(tp.group,
                              base_split == TensorSplit::Columns ? LoRAParallel::Row : LoRAParallel::Column,
                              whole_in);
}

std::string expected_targets() {
  std::string out;
  for (const auto& t : kLoRATargets) out += (out.empty() ? "" : ", ") + t;
  return out;
}

}  // namespace

std::vector<std::string> parse_lora_targets(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    std::string name =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    EMBER_CHECK(std::find(kLoRATargets.begin(), kLoRATargets.end(), name) != kLoRATargets.end(),
                "--lora-targets: unknown target \"", name, "\" (expected ", expected_targets(),
                ")");
    EMBER_CHECK(std::find(out.begin(), out.end(), name) == out.end(), "--lora-targets: target \"",
                name, "\" is given twice");
    out.push_back(name);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

namespace {

// Every option checked before the model is touched.
void check_adapter_options(const Transformer& model, const LoRAConfig& lora,
                           const std::string& quantize) {
  EMBER_CHECK(quantize == "none" || quantize == "nf4" || quantize == "nf4-dq",
              "--quantize must be none, nf4 or nf4-dq, got \"", quantize, "\"");
  EMBER_CHECK(!lora.targets.empty(), "--lora-targets: no target given");
  std::string list;
  for (const auto& t : lora.targets) list += (list.empty() ? "" : ",") + t;
  parse_lora_targets(list);  // each known, none twice
  EMBER_CHECK(!model.config().lora, "add_adapters: the model already has adapters");
  EMBER_CHECK(lora.r >= 1, "--lora-r: r must be >= 1, got ", lora.r);
  EMBER_CHECK(lora.alpha > 0, "--lora-alpha: alpha must be > 0, got ", lora.alpha);
  EMBER_CHECK(lora.dropout >= 0 && lora.dropout < 1,
              "--lora-dropout: dropout must be in [0, 1), got ", lora.dropout);
}

// Whether a Linear projection is left below blocks (not yet quantized).
bool any_linear_projection(Module& blocks) {
  bool found = false;
  walk(blocks, "", [&](Module& parent, const std::string& name, const std::string&) {
    found = found || (!projection_target(name).empty() &&
                      dynamic_cast<const Linear*>(&child(parent, name)) != nullptr);
  });
  return found;
}

// requires_grad false on every parameter but the rows add_vocab_rows added.
void freeze_base(const Module& model) {
  const std::string suffix = ".added_rows";
  for (const auto& [name, v] : model.named_parameters()) {
    const bool added = name.size() > suffix.size() &&
                       name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!added) v.set_requires_grad(false);
  }
}

// Each Linear projection below blocks (named prefix + its path) swapped for its NF4 form (the
// Linear then released); under tensor parallelism the shard of the whole weight whole_of gives.
void quantize_projections(Module& blocks, const std::string& prefix, bool double_quant,
                          const TensorParallel& tp, const WholeWeight& whole_of) {
  walk(blocks, "", [&](Module& parent, const std::string& name, const std::string& path) {
    const auto* linear = dynamic_cast<const Linear*>(&child(parent, name));
    if (projection_target(name).empty() || linear == nullptr) return;
    if (!tp.active()) {
      parent.replace_module(name, Nf4Linear::quantize(*linear, double_quant));
      return;
    }
    const std::string weight = prefix + path + ".weight";
    const Tensor whole = whole_of ? whole_of(weight) : Tensor();
    EMBER_CHECK(whole.defined(), "quantize: the whole weight of ", weight,
                " is needed to quantize its tensor-parallel shard");
    parent.replace_module(name, Nf4Linear::quantize_shard(whole, linear->bias(), double_quant,
                                                          tensor_split(weight), tp.rank(),
                                                          tp.size(), weight));
  });
}

// The adapters' draws of blocks 0 .. layer - 1 (r x in for each targeted projection weight
// [out, in]): where a pipeline stage whose first block is `layer` takes up the one-process
// model's stream, so that its adapters are the same-named ones of one process.
uint64_t draws_before(const ModelConfig& cfg, const LoRAConfig& lora, int64_t layer) {
  const std::string prefix = "model.layers.", suffix = ".weight";
  uint64_t n = 0;
  for (const PlacedParameter& p : place_parameters(cfg, make_parallel_layout(cfg, 1, 1))) {
    if (!p.name.starts_with(prefix) || !p.name.ends_with(suffix) ||
        std::stoll(p.name.substr(prefix.size())) >= layer)
      continue;
    const std::string path = p.name.substr(0, p.name.size() - suffix.size());
    const std::string target = projection_target(path.substr(path.rfind('.') + 1));
    if (!target.empty() && std::find(lora.targets.begin(), lora.targets.end(), target) != lora.targets.end())
      n += static_cast<uint64_t>(lora.r * p.shape.at(1));
  }
  return n;
}

}  // namespace

void quantize_block(Transformer& model, int64_t layer, bool double_quant,
                    const WholeWeight& whole_of) {
  Module& blocks = child(child(model, "model"), "layers");
  const std::string at = std::to_string(layer);
  quantize_projections(child(blocks, at), "model.layers." + at + ".", double_quant,
                       model.tensor_parallel(), whole_of);
}

void add_adapters(Transformer& model, const LoRAConfig& lora, const std::string& quantize,
                  uint64_t seed) {
  check_adapter_options(model, lora, quantize);
  EMBER_CHECK(!model.tensor_parallel().active() || !model.config().moe,
              "tensor parallelism of LoRA adapters on an MoE model is not available yet "
              "(use --tp 1, or --full)");
  freeze_base(model);
  const LoRAOptions options{lora.r, lora.alpha, lora.dropout};
  auto wants = [&](const std::string& t) {
    return std::find(lora.targets.begin(), lora.targets.end(), t) != lora.targets.end();
  };
  Module& blocks = child(child(model, "model"), "layers");
  const TensorParallel& tp = model.tensor_parallel();
  if (quantize != "none") {
    // A tensor-parallel model's blocks were quantized as they were read (load_model_weights):
    // its Linear shards alone cannot give the one-rank quantization.
    EMBER_CHECK(!tp.active() || !any_linear_projection(blocks), "add_adapters: under tensor "
                "parallelism the base must be quantized while it is read (load_model_weights)");
    quantize_projections(blocks, "model.layers.", quantize == "nf4-dq", tp, {});
  }
  Generator gen(seed);
  // A pipeline stage draws its blocks' adapters, and the last stage the head's, as one process does.
  gen.advance(draws_before(model.config(), lora, model.stage().first_layer));
  const auto& dropout_gen = model.shared_dropout_generator();
  const int64_t V = model.config().vocab_size;
  walk(blocks, "", [&](Module& parent, const std::string& name, const std::string& path) {
    const std::string target = projection_target(name);
    if (target.empty() || !wants(target)) return;
    const std::string full = "model.layers." + path;
    const TargetSplit t = target_split(child(parent, name), full, tp, V);
    auto wrapped = wrap_in_lora(child_ptr(parent, name), options, gen, dropout_gen, model.dtype(), t.whole);
    EMBER_CHECK(wrapped != nullptr, "add_adapters: ", full, " is neither a Linear nor NF4");
    shard_adapter(*wrapped, full, tp, t.split, t.whole.in);
    parent.replace_module(name, wrapped);
  });
  if (wants("head") && model.stage().last()) {
    if (model.config().tie_embeddings) {
      auto adapter = std::make_shared<LoRAAdapter>(model.config().d_model, V, options, gen,
                                                   model.dtype(), dropout_gen);
      shard_adapter(*adapter, "lm_head", tp, TensorSplit::VocabRows, model.config().d_model);
      model.set_tied_head_adapter(adapter);
    } else {
      const TargetSplit t = target_split(child(model, "lm_head"), "lm_head", tp, V);
      auto wrapped = wrap_in_lora(child_ptr(model, "lm_head"), options, gen, dropout_gen,
                                  model.dtype(), t.whole);
      EMBER_CHECK(wrapped != nullptr, "add_adapters: lm_head is not a Linear");
      shard_adapter(*wrapped, "lm_head", tp, t.split, t.whole.in);
      model.replace_module("lm_head", wrapped);
    }
  }
  model.set_finetune_config(lora, quantize);
}

void add_vocab_rows(Transformer& model, int64_t n, uint64_t seed) {
  EMBER_CHECK(n >= 1, "add_vocab_rows: n must be >= 1, got ", n);
  EMBER_CHECK(!model.config().lora, "add_vocab_rows: call it before add_adapters");
  const int64_t C = model.config().d_model, V = model.config().vocab_size;
  EMBER_CHECK(V + n <= kMaxVocabSize, "add_vocab_rows: ", V, " + ", n,
              " rows exceed the vocabulary limit ", kMaxVocabSize);
  Generator gen(seed);
  Embedding& embed = model.embed_tokens();
  embed.add_rows(Tensor::randn({n, C}, gen, model.dtype(), 0, 0.02));
  embed.weight().set_requires_grad(false);
  if (!model.config().tie_embeddings) {
    auto head = std::dynamic_pointer_cast<Linear>(child_ptr(model, "lm_head"));
    EMBER_CHECK(head != nullptr, "add_vocab_rows: lm_head is not a plain Linear");
    head->add_rows(Tensor::randn({n, C}, gen, model.dtype(), 0, 0.02));
    head->weight().set_requires_grad(false);
  }
  model.set_vocab_size(V + n);
}

std::vector<std::pair<std::string, Variable>> trainable_parameters(const Module& model) {
  std::vector<std::pair<std::string, Variable>> out;
  for (const auto& [name, v] : model.named_parameters()) {
    if (v.requires_grad()) out.emplace_back(name, v);
  }
  return out;
}

std::map<std::string, Tensor> merged_state_dict(const Transformer& model) {
  std::map<std::string, Tensor> out = model.state_dict();
  auto fold = [&](const std::string& path, const Tensor& weight) {
    out[path + ".weight"] = weight;
    for (const char* extra : {".lora_A.weight", ".lora_B.weight", ".added_rows"})
      out.erase(path + extra);
  };
  walk(
      const_cast<Transformer&>(model), "",
      [&](Module& parent, const std::string& name, const std::string& path) {
        const Module& m = child(parent, name);
        if (const auto* lora = dynamic_cast<const LoRALinear*>(&m)) {
          fold(path, lora->merged_weight());
        } else if (const auto* adapter = dynamic_cast<const LoRAAdapter*>(&m)) {  // the tied head's
          fold(path, kernels::add(model.embed_tokens().full_weight(), adapter->delta_weight()));
        } else if (const auto* nf4 = dynamic_cast<const Nf4Linear*>(&m)) {
          fold(path, nf4->dequantized_weight(model.dtype()));
        } else if (const auto* linear = dynamic_cast<const Linear*>(&m);
                   linear && linear->added_rows().defined()) {
          fold(path, linear->full_weight());
        } else if (const auto* e = dynamic_cast<const Embedding*>(&m);
                   e && e->added_rows().defined()) {
          fold(path, e->full_weight());
        }
      });
  return out;
}

ModelConfig merged_config(const ModelConfig& finetune_config) {
  ModelConfig c = finetune_config;
  const auto& targets = c.lora ? c.lora->targets : std::vector<std::string>{};
  if (c.tie_embeddings && std::find(targets.begin(), targets.end(), "head") != targets.end()) {
    c.tie_embeddings = false;
  }
  c.lora.reset();
  c.quantize = "none";
  return c;
}

}  // namespace ember::nn
