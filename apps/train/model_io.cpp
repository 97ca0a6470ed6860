// Model/tokenizer loading and the plain sampler.
#include "apps/train/model_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "nn/checkpoint.h"
#include "autograd/grad_mode.h"
#include "core/rng.h"

namespace ember::apps {

data::Tokenizer default_tokenizer(const nn::ModelConfig& cfg) {
  if (cfg.vocab_size == 256) return data::Tokenizer();
  return data::Tokenizer::bytes({std::string(data::kEndOfText)});
}

std::string default_corpus() {
  const std::string dir = "/usr/share/games/fortunes";
  EMBER_CHECK(std::filesystem::is_directory(dir), "no --data given and the default corpus ", dir,
              " is missing: install Debian's fortunes package (apt-get install fortunes)");
  return dir;
}

std::optional<data::Tokenizer> checkpoint_tokenizer(const nn::Checkpoint& c, const std::string& path) {
  if (!c.tokenizer_json.empty()) {
    try {
      return data::Tokenizer::from_json(c.tokenizer_json);
    } catch (const Error& e) {
      if (path.empty()) throw;
      throw Error(path + ": the stored tokenizer (/tokenizer/json): " + e.what());
    }
  }
  if (c.config.vocab_size == 256 || c.config.vocab_size == 257) return default_tokenizer(c.config);
  return std::nullopt;
}

namespace {

// c.model against the parameters of `model`, a model of c.config.
void check_tensors_against(const nn::Checkpoint& c, const std::string& path, const nn::Module& model) {
  std::map<std::string, Shape> expected;
  for (const auto& [name, v] : model.named_parameters()) expected.emplace(name, v.shape());
  for (const auto& [name, t] : c.model) {
    if (!expected.count(name)) {
      const bool tied_head = name == "lm_head.weight" && c.config.tie_embeddings;
      throw Error(path + ": unexpected tensor /model/" + name + " of shape " + shape_str(t.shape()) +
                  (tied_head ? " (the config ties the output layer to the embedding: tie_embeddings is true)"
                             : " (not a parameter of the model its config describes)"));
    }
  }
  for (const auto& [name, shape] : expected) {
    const auto it = c.model.find(name);
    EMBER_CHECK(it != c.model.end(), path, ": missing tensor /model/", name, " (expected shape ",
                shape_str(shape), " from the checkpoint's config)");
    const Tensor& t = it->second;
    EMBER_CHECK(t.shape() == shape, path, ": tensor /model/", name, " has shape ", shape_str(t.shape()),
                ", expected ", shape_str(shape), " from the checkpoint's config");
    EMBER_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, path, ": tensor /model/", name,
                " is ", dtype_name(t.dtype()), ", expected float32");
    const Tensor f = t.to(DType::Float32).contiguous();
    const float* p = f.data<float>();
    for (int64_t i = 0; i < f.numel(); ++i) {
      EMBER_CHECK(std::isfinite(p[i]), path, ": tensor /model/", name, " holds a non-finite value (", p[i],
                  " at flat index ", i, ")");
    }
  }
}

}  // namespace

void nn::check_model_tensors(const nn::Checkpoint& c, const std::string& path) {
  check_tensors_against(c, path, nn::Transformer(c.config, 0));
}

std::unique_ptr<nn::Transformer> nn::model_from_checkpoint(const nn::Checkpoint& c, const std::string& path) {
  auto model = std::make_unique<nn::Transformer>(c.config, 0);
  check_tensors_against(c, path, *model);
  model->load_state_dict(c.model);
  model->eval();
  return model;
}

LoadedModel load_model(const std::string& checkpoint_path) {
  const nn::Checkpoint c = nn::read_checkpoint(checkpoint_path, /*with_optim=*/false);
  LoadedModel out;
  out.model = nn::model_from_checkpoint(c, checkpoint_path);
  std::optional<data::Tokenizer> tokenizer = checkpoint_tokenizer(c, checkpoint_path);
  out.has_tokenizer = tokenizer.has_value();
  out.tokenizer = tokenizer ? std::move(*tokenizer) : default_tokenizer(c.config);
  return out;
}

void print_sample(const nn::Transformer& model, const data::Tokenizer& tokenizer, const std::string& prompt,
                  int64_t n, uint64_t seed) {
  NoGradGuard no_grad;
  std::vector<uint32_t> ids = tokenizer.encode(prompt);
  if (ids.empty()) ids.push_back(static_cast<uint32_t>(tokenizer.find_special(data::kEndOfText).value_or('\n')));
  const int64_t V = model.config().vocab_size, max_T = model.config().max_seq_len;
  const std::optional<uint32_t> eot = tokenizer.find_special(data::kEndOfText);
  Generator gen(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(ids.size()), max_T);
    std::vector<int64_t> window(ids.end() - T, ids.end());
    const Tensor logits = model.forward(Tensor::from_vector(window, {1, T})).logits.data();
    const float* last = logits.data<float>() + (T - 1) * V;
    // top-k 40 at temperature 1
    std::vector<int64_t> order(static_cast<size_t>(V));
    for (int64_t v = 0; v < V; ++v) order[v] = v;
    const int64_t k = std::min<int64_t>(40, V);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return last[a] > last[b]; });
    std::vector<double> p(static_cast<size_t>(k));
    double total = 0;
    for (int64_t j = 0; j < k; ++j) total += p[j] = std::exp(static_cast<double>(last[order[j]] - last[order[0]]));
    const auto r = philox4x32(gen.seed, gen.advance(1));
    double u = uniform_double(r[0], r[1]) * total;
    int64_t pick = order[k - 1];
    for (int64_t j = 0; j < k; ++j) {
      if ((u -= p[j]) <= 0) {
        pick = order[j];
        break;
      }
    }
    if (eot && static_cast<uint32_t>(pick) == *eot) break;
    ids.push_back(static_cast<uint32_t>(pick));
  }
  const std::string text = tokenizer.decode(std::span<const uint32_t>(ids.data(), ids.size()));
  std::printf("--- sample ---\n%s\n--------------\n", text.c_str());
}

}  // namespace ember::apps
