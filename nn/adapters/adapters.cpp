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

// A LoRALinear over the Linear or Nf4Linear base (null for any other module).
std::shared_ptr<LoRALinear> wrap_in_lora(const std::shared_ptr<Module>& base,
                                         const LoRAOptions& options, Generator& gen,
                                         const std::shared_ptr<Generator>& dropout_gen,
                                         DType dtype) {
  if (auto linear = std::dynamic_pointer_cast<Linear>(base)) {
    return std::make_shared<LoRALinear>(linear, options, gen, dropout_gen);
  }
  if (auto nf4 = std::dynamic_pointer_cast<Nf4Linear>(base)) {
    return std::make_shared<LoRALinear>(nf4, options, gen, dropout_gen, dtype);
  }
  return nullptr;
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

// requires_grad false on every parameter but the rows add_vocab_rows added.
void freeze_base(const Module& model) {
  const std::string suffix = ".added_rows";
  for (const auto& [name, v] : model.named_parameters()) {
    const bool added = name.size() > suffix.size() &&
                       name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!added) v.set_requires_grad(false);
  }
}

// Each Linear projection below blocks swapped for its NF4 form (the Linear then released).
void quantize_projections(Module& blocks, bool double_quant) {
  walk(blocks, "", [&](Module& parent, const std::string& name, const std::string&) {
    const auto* linear = dynamic_cast<const Linear*>(&child(parent, name));
    if (projection_target(name).empty() || linear == nullptr) return;
    parent.replace_module(name, Nf4Linear::quantize(*linear, double_quant));
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

void quantize_block(Transformer& model, int64_t layer, bool double_quant) {
  Module& blocks = child(child(model, "model"), "layers");
  quantize_projections(child(blocks, std::to_string(layer)), double_quant);
}

void add_adapters(Transformer& model, const LoRAConfig& lora, const std::string& quantize,
                  uint64_t seed) {
  check_adapter_options(model, lora, quantize);
  freeze_base(model);
  const LoRAOptions options{lora.r, lora.alpha, lora.dropout};
  auto wants = [&](const std::string& t) {
    return std::find(lora.targets.begin(), lora.targets.end(), t) != lora.targets.end();
  };
  Module& blocks = child(child(model, "model"), "layers");
  if (quantize != "none") quantize_projections(blocks, quantize == "nf4-dq");
  Generator gen(seed);
  // A pipeline stage draws its blocks' adapters, and the last stage the head's, as one process does.
  gen.advance(draws_before(model.config(), lora, model.stage().first_layer));
  const auto& dropout_gen = model.shared_dropout_generator();
  walk(blocks, "", [&](Module& parent, const std::string& name, const std::string& path) {
    const std::string target = projection_target(name);
    if (target.empty() || !wants(target)) return;
    auto wrapped = wrap_in_lora(child_ptr(parent, name), options, gen, dropout_gen, model.dtype());
    EMBER_CHECK(wrapped != nullptr, "add_adapters: model.layers.", path,
                " is neither a Linear nor NF4");
    parent.replace_module(name, wrapped);
  });
  if (wants("head") && model.stage().last()) {
    if (model.config().tie_embeddings) {
      const Embedding& e = model.embed_tokens();
      model.set_tied_head_adapter(std::make_shared<LoRAAdapter>(
          model.config().d_model, e.num_embeddings(), options, gen, model.dtype(), dropout_gen));
    } else {
      auto wrapped =
          wrap_in_lora(child_ptr(model, "lm_head"), options, gen, dropout_gen, model.dtype());
      EMBER_CHECK(wrapped != nullptr, "add_adapters: lm_head is not a Linear");
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
