// Test helper: ember's logits for a checkpoint and token ids, as JSON
// {"logits": [[V floats] per position]} (float32 values printed exactly).
//   hf_logits CKPT ID [ID ...]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "apps/common/model_io.h"
#include "autograd/grad_mode.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hf_logits CKPT ID [ID ...]\n");
    return 2;
  }
  try {
    ember::apps::LoadedModel lm = ember::apps::load_model(argv[1]);
    std::vector<int64_t> ids;
    for (int i = 2; i < argc; ++i) ids.push_back(std::atoll(argv[i]));
    const int64_t T = static_cast<int64_t>(ids.size()), V = lm.model->config().vocab_size;
    ember::NoGradGuard no_grad;
    const ember::Tensor logits =
        lm.model->forward(ember::Tensor::from_vector(ids, {1, T})).logits.data().contiguous();
    const float* p = logits.data<float>();
    std::printf("{\"logits\": [");
    for (int64_t t = 0; t < T; ++t) {
      std::printf("%s[", t ? ", " : "");
      for (int64_t v = 0; v < V; ++v)
        std::printf("%s%.9g", v ? ", " : "", static_cast<double>(p[t * V + v]));
      std::printf("]");
    }
    std::printf("]}\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_logits: %s\n", e.what());
    return 1;
  }
  return 0;
}
