// What `ember generate` and `ember chat` share: the sampling options, the
// check that a checkpoint's tokenizer has the ChatML tokens, and one
// generation streamed to stdout (UTF-8 characters whole; on a terminal shown as
// terminal_text, without special tokens) with its speed on stderr. A chat reply
// stops at <|im_end|>, <|endoftext|> or <|im_start|>, none printed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "apps/cli/commands.h"
#include "apps/common/model_io.h"
#include "inference/generate.h"

namespace ember::apps {

struct SamplingFlags {
  int64_t max_tokens = 256, top_k = 0;
  double temperature = 1.0, top_p = 1.0, repetition_penalty = 1.0;
  uint64_t seed = 0;
  std::string kv_cache_dtype = "float32";  // or "bfloat16", as `ember serve --kv-cache-dtype`
  std::string weights = "float32";         // or "bf16", as `ember serve --weights`
};

// --max-tokens, --temperature, --top-k, --top-p, --repetition-penalty, --seed (with seed_help),
// --kv-cache-dtype and --weights.
void add_sampling_options(CLI::App* sub, SamplingFlags& f, const std::string& seed_help);
// An Error (before any model loads) when --max-tokens is negative or a sampling option is out of range.
void check_sampling_flags(const SamplingFlags& f);

// One line when the tokenizer lacks <|im_start|> or <|im_end|>, saying how to add them.
void require_chat_tokens(const data::Tokenizer& tokenizer, const std::string& checkpoint);

struct StreamedText {
  inference::GenerationResult result;
  std::string text;  // the generated text (decoded tokens as they are, without the token that ended it)
};

// Generates after ids (the prompt, at least one token) with sampling seed
// `seed`, printing `echo` first, then each token as it comes, then a newline;
// the stop reason and speed go to stderr. chat: stops at <|im_end|> (the stop
// token), <|endoftext|> or <|im_start|> (a new message); otherwise at <|endoftext|>
// when the tokenizer has it. When stdout is a terminal, what is printed (echo too) is
// terminal_text and special tokens drawn mid-text are left out; otherwise the bytes as they are.
// Only ids the tokenizer decodes are drawn (a preset's vocabulary may be larger).
StreamedText stream_generation(const LoadedModel& lm, const std::vector<int64_t>& ids, const SamplingFlags& f,
                               uint64_t seed, bool chat, std::string_view echo = {});

}  // namespace ember::apps
