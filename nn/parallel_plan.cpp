// The tensor- and pipeline-parallel plan of a config: which keys T must divide, each
// parameter's split by its name (docs/model.md#parameter-names; docs/scaling.md, "Choosing
// T, P and D"), the stages' blocks and the parameters each stage holds.
#include "nn/parallel_plan.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <utility>

#include "core/error.h"
#include "nn/sizing/parameter_layout.h"

namespace ember::nn {
namespace {

// A parameter name with every all-digit part (a layer, an expert) replaced by '#'.
std::string name_pattern(const std::string& name) {
  std::string out, part;
  auto flush = [&] {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](unsigned char c) {
      return std::isdigit(c) != 0;
    });
    out += digits ? "#" : part;
    part.clear();
  };
  for (char c : name) {
    if (c == '.') {
      flush();
      out += '.';
    } else {
      part += c;
    }
  }
  flush();
  return out;
}

// Every parameter name of a Transformer, by pattern.
const std::map<std::string, TensorSplit>& split_rules() {
  static const std::map<std::string, TensorSplit> rules = [] {
    using S = TensorSplit;
    std::map<std::string, TensorSplit> r = {
        {"model.embed_tokens.weight", S::VocabRows}, {"lm_head.weight", S::VocabRows},
        {"model.embed_positions.weight", S::Whole},  {"score.weight", S::Whole},
        {"model.norm.weight", S::Whole},             {"model.norm.bias", S::Whole},
    };
    const std::string layer = "model.layers.#.";
    for (const char* norm : {"input_layernorm", "post_attention_layernorm"}) {
      r[layer + norm + ".weight"] = r[layer + norm + ".bias"] = S::Whole;
    }
    r[layer + "self_attn.q_norm.weight"] = r[layer + "self_attn.k_norm.weight"] = S::Whole;
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
      r[layer + "self_attn." + proj + ".weight"] = r[layer + "self_attn." + proj + ".bias"] = S::Rows;
    }
    r[layer + "self_attn.o_proj.weight"] = S::Columns;
    r[layer + "self_attn.o_proj.bias"] = S::Whole;  // added once, after the all-reduce
    r[layer + "mlp.gate.weight"] = S::Whole;         // the MoE router
    for (const char* ffn : {"mlp.", "mlp.experts.#.", "mlp.shared_experts.#."}) {
      const std::string at = layer + ffn;
      for (const char* proj : {"gate_proj", "up_proj"}) r[at + proj + ".weight"] = r[at + proj + ".bias"] = S::Rows;
      r[at + "down_proj.weight"] = S::Columns;
      r[at + "down_proj.bias"] = S::Whole;
    }
    // LoRA adapters (docs/model.md#lora): a column-parallel target's A whole (its input is), B
    // by rows as the base; a row-parallel one's A by columns as the base, B whole (applied once,
    // after the sum); the head's B by vocabulary rows.
    std::map<std::string, TensorSplit> adapters;
    for (const auto& [name, split] : r) {
      const std::string suffix = ".weight";
      const size_t at = name.size() - std::min(name.size(), suffix.size());
      if (split == S::Whole || split == S::VocabRows || name.compare(at, suffix.size(), suffix) != 0)
        continue;
      const std::string base = name.substr(0, at);
      const bool rows = split == S::Rows;
      adapters[base + ".lora_A.weight"] = rows ? S::Whole : S::Columns;
      adapters[base + ".lora_B.weight"] = rows ? S::Rows : S::Whole;
    }
    adapters["lm_head.lora_A.weight"] = S::Whole;
    adapters["lm_head.lora_B.weight"] = S::VocabRows;
    r.merge(adapters);
    return r;
  }();
  return rules;
}

void check_divides(int64_t tp, const char* key, int64_t value) {
  EMBER_CHECK(value % tp == 0, "--tp ", tp, ": ", key, " ", value, " is not divisible by ", tp);
}

}  // namespace

const char* split_name(TensorSplit split) {
  switch (split) {
    case TensorSplit::Rows: return "rows";
    case TensorSplit::Columns: return "columns";
    case TensorSplit::VocabRows: return "vocab rows";
    case TensorSplit::Whole: return "whole";
  }
  return "?";
}

void check_tensor_parallel(const ModelConfig& cfg, int64_t tp) {
  EMBER_CHECK(tp >= 1, "--tp must be >= 1, got ", tp);
  check_divides(tp, "n_heads", cfg.n_heads);
  check_divides(tp, "n_kv_heads", cfg.n_kv_heads);
  bool dense = false;
  for (int64_t layer = 0; layer < cfg.n_layers; ++layer) dense = dense || !cfg.layer_is_moe(layer);
  if (dense) check_divides(tp, "ffn_hidden", cfg.ffn_hidden);
  if (cfg.moe) check_divides(tp, "moe.expert_hidden", cfg.moe->expert_hidden);
}

int64_t padded_vocab(int64_t vocab_size, int64_t tp) {
  EMBER_CHECK(tp >= 1, "--tp must be >= 1, got ", tp);
  return (vocab_size + tp - 1) / tp * tp;
}

TensorSplit tensor_split(const std::string& name) {
  const auto& rules = split_rules();
  const auto it = rules.find(name_pattern(name));
  EMBER_CHECK(it != rules.end(), "no tensor-parallel split rule for parameter \"", name,
              "\" (docs/model.md#parameter-names lists the Transformer's)");
  return it->second;
}

std::vector<int64_t> rank_shape(TensorSplit split, const std::vector<int64_t>& shape, int64_t tp) {
  EMBER_CHECK(tp >= 1, "--tp must be >= 1, got ", tp);
  std::vector<int64_t> out = shape;
  if (split == TensorSplit::Whole) return out;
  const size_t dim = split == TensorSplit::Columns ? 1 : 0;
  EMBER_CHECK(shape.size() > dim, "a ", split_name(split), " split needs ", dim + 1, " dimensions, got ",
              shape_str(shape));
  if (split == TensorSplit::VocabRows) {
    out[dim] = padded_vocab(shape[dim], tp) / tp;
  } else {
    EMBER_CHECK(shape[dim] % tp == 0, "a ", split_name(split), " split of ", shape_str(shape), " over ", tp,
                " ranks: ", shape[dim], " is not divisible by ", tp);
    out[dim] = shape[dim] / tp;
  }
  return out;
}

std::vector<int64_t> stage_layers(int64_t n_layers, int64_t pp, const std::vector<int64_t>& counts) {
  EMBER_CHECK(pp >= 1, "--pp must be >= 1, got ", pp);
  if (counts.empty()) {
    EMBER_CHECK(pp <= n_layers, "--pp ", pp, ": the model has ", n_layers,
                " blocks (n_layers) and every stage needs at least one");
    std::vector<int64_t> out(static_cast<size_t>(pp), n_layers / pp);
    for (int64_t s = 0; s < n_layers % pp; ++s) ++out[static_cast<size_t>(s)];
    return out;
  }
  EMBER_CHECK(static_cast<int64_t>(counts.size()) == pp, "--pp-layers gives ", counts.size(),
              " counts for --pp ", pp, "; give one block count per stage");
  __int128 sum = 0;
  std::string list;
  for (size_t s = 0; s < counts.size(); ++s) {
    EMBER_CHECK(counts[s] >= 1, "--pp-layers: stage ", s, " has ", counts[s],
                " blocks; every stage needs at least one");
    sum += counts[s];
    if (s > 0) list += ',';
    list += std::to_string(counts[s]);
  }
  EMBER_CHECK(sum == n_layers, "--pp-layers ", list, " sums to ", static_cast<long double>(sum),
              " blocks, but the model has n_layers ", n_layers);
  return counts;
}

int64_t ParallelLayout::first_layer(int64_t stage) const {
  EMBER_CHECK(stage >= 0 && stage < pp(), "stage ", stage, " is outside 0 .. ", pp() - 1);
  int64_t first = 0;
  for (int64_t s = 0; s < stage; ++s) first += stage_layers[static_cast<size_t>(s)];
  return first;
}

int64_t ParallelLayout::stage_of_layer(int64_t layer) const {
  int64_t end = 0;
  for (int64_t s = 0; s < pp(); ++s) {
    end += stage_layers[static_cast<size_t>(s)];
    if (layer < end) return s;
  }
  throw Error("block " + std::to_string(layer) + " is beyond the layout's " + std::to_string(end) + " blocks");
}

std::vector<int64_t> parse_layer_counts(const std::string& text) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (true) {
    const size_t comma = std::min(text.find(',', at), text.size());
    int64_t v = 0;
    const char* first = text.data() + at;
    const char* last = text.data() + comma;
    const auto [end, ec] = std::from_chars(first, last, v);
    EMBER_CHECK(first != last && *first != '-' && ec == std::errc() && end == last,
                "--pp-layers must be block counts separated by commas (like 3,3,2), got \"", text, "\"");
    out.push_back(v);
    if (comma == text.size()) return out;
    at = comma + 1;
  }
}

ParallelLayout make_parallel_layout(const ModelConfig& cfg, int64_t tp, int64_t pp,
                                    const std::vector<int64_t>& pp_layers) {
  check_tensor_parallel(cfg, tp);
  return ParallelLayout{tp, stage_layers(cfg.n_layers, pp, pp_layers)};
}

std::vector<PlacedParameter> place_parameters(const ModelConfig& cfg, const ParallelLayout& layout) {
  std::vector<PlacedParameter> out;
  const int64_t last = layout.pp() - 1;
  for (ParameterEntry& p : parameter_layout(cfg)) {
    PlacedParameter q;
    q.split = tensor_split(p.name);
    q.rank_shape = rank_shape(q.split, p.shape, layout.tp);
    q.rank_numel = 1;
    for (int64_t d : q.rank_shape) q.rank_numel *= d;
    q.numel = p.numel;
    if (p.block >= 0) {
      q.stages = {layout.stage_of_layer(p.block)};
    } else if (p.block == kTokenTable) {
      q.stages = cfg.tie_embeddings && last > 0 ? std::vector<int64_t>{0, last} : std::vector<int64_t>{0};
    } else {
      q.stages = {p.name == "model.embed_positions.weight" ? 0 : last};
    }
    q.name = std::move(p.name);
    q.shape = std::move(p.shape);
    out.push_back(std::move(q));
  }
  return out;
}

std::vector<StageParameters> stage_parameters(const ModelConfig& cfg, const ParallelLayout& layout) {
  std::vector<StageParameters> out(static_cast<size_t>(layout.pp()));
  for (const PlacedParameter& p : place_parameters(cfg, layout)) {
    for (int64_t s : p.stages) {
      out[static_cast<size_t>(s)].numel += p.numel;
      out[static_cast<size_t>(s)].rank_numel += p.rank_numel;
    }
  }
  return out;
}

int64_t micro_batches_in_flight(int64_t stage, int64_t pp, int64_t micro_batches, bool gpipe) {
  EMBER_CHECK(stage >= 0 && stage < pp && micro_batches >= 1, "micro_batches_in_flight: stage ", stage,
              " of ", pp, " with ", micro_batches, " micro-batches");
  return gpipe ? micro_batches : std::min(pp - stage, micro_batches);
}

double bubble_fraction(int64_t pp, int64_t micro_batches) {
  EMBER_CHECK(pp >= 1 && micro_batches >= 1, "bubble_fraction: P ", pp, ", M ", micro_batches);
  return static_cast<double>(pp - 1) / static_cast<double>(micro_batches + pp - 1);
}

}  // namespace ember::nn
