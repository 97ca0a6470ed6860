// Loads an ember checkpoint (written by `ember train`) and continues a prompt
// with the KV cache, printing tokens as they come.
//   generate_from_checkpoint CHECKPOINT [PROMPT] [MAX_TOKENS]
#include <cstdio>
#include <string>

#include "ember/ember.h"

using namespace ember;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT [PROMPT] [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    // Weights and config (checked against each other), and the tokenizer the ids are in.
    const nn::Checkpoint checkpoint = nn::read_checkpoint(argv[1], /*with_optim=*/false);
    const std::unique_ptr<nn::Transformer> model = nn::model_from_checkpoint(checkpoint, argv[1]);
    const std::optional<data::Tokenizer> stored =
        data::stored_tokenizer(checkpoint.tokenizer_json, checkpoint.config.vocab_size, argv[1]);
    if (!stored) throw Error(std::string(argv[1]) + ": stores no tokenizer");
    const data::Tokenizer& tokenizer = *stored;
    const std::string prompt = argc > 2 ? argv[2] : "The ";
    std::vector<int64_t> ids;
    for (uint32_t id : tokenizer.encode(prompt)) ids.push_back(id);

    inference::SamplingOptions sampling;
    sampling.max_tokens = argc > 3 ? std::stoll(argv[3]) : 100;
    sampling.temperature = 0.8;
    sampling.top_k = 40;
    sampling.seed = 1;
    std::printf("%s", prompt.c_str());
    const inference::GenerationResult r = inference::generate(*model, ids, sampling, [&](int64_t token) {
      const uint32_t id = static_cast<uint32_t>(token);
      std::printf("%s", tokenizer.decode({&id, 1}).c_str());
      std::fflush(stdout);
      return true;  // false would stop here
    });
    std::printf("\n[%zu tokens, %.0f tokens/s decode]\n", r.tokens.size(),
                r.decode_tokens_per_second());
    return r.tokens.empty() ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
