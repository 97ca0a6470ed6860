// A checkpoint's model with its tokenizer, the default corpus, and the end-of-run sample.
#include "apps/train/model_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "nn/checkpoint.h"
#include "autograd/grad_mode.h"
#include "core/rng.h"
#include "data/tokenizer/stored_tokenizer.h"

namespace ember::apps {

std::string default_corpus() {
  const std::string dir = "/usr/share/games/fortunes";
  EMBER_CHECK(std::filesystem::is_directory(dir), "no --data given and the default corpus ", dir,
              " is missing: install Debian's fortunes package (apt-get install fortunes)");
  return dir;
}

LoadedModel load_model(const std::string& checkpoint_path) {
  const nn::Checkpoint c = nn::read_checkpoint(checkpoint_path, /*with_optim=*/false);
  LoadedModel out;
  out.model = nn::model_from_checkpoint(c, checkpoint_path);
  std::optional<data::Tokenizer> tokenizer = data::stored_tokenizer(c.tokenizer_json, c.config.vocab_size, checkpoint_path);
  out.has_tokenizer = tokenizer.has_value();
  out.tokenizer = tokenizer ? std::move(*tokenizer) : data::byte_tokenizer(c.config.vocab_size);
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
