// The prompts of `ember bench-serve`: the client has no tokenizer, so a prompt
// of about P tokens is P words. Generated prompts draw each word from a fixed
// list of common English words, each one token of the GPT-2 tokenizer after a
// space (the server's usage.prompt_tokens gives the true count); with
// --prompt-file, a prompt is P consecutive words of the file from a random
// start (wrapping around). Prompt i depends only on the seed and i.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember::apps {

// A 64-bit mix of (seed, index) (splitmix64): the seed of request index's random choices.
uint64_t request_seed(uint64_t seed, uint64_t index);

class BenchPrompts {
 public:
  // file_path empty: generated prompts. Throws when the file cannot be read, is not UTF-8
  // (naming the line and byte offset) or holds no word.
  BenchPrompts(int64_t words_per_prompt, uint64_t seed, const std::string& file_path);

  std::string prompt(uint64_t index) const;

 private:
  int64_t words_per_prompt_;
  uint64_t seed_;
  std::vector<std::string> file_words_;  // empty: generated
};

}  // namespace ember::apps
