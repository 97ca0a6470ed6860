// A request's engine events turned into what the API returns: text deltas
// (whole UTF-8 characters, stop strings cut and held back), the log-probability
// entries of the tokens with their text, and the finish reason. The same
// assembler serves streamed and whole responses; tokens are taken one by one,
// so where a stop string ends the output does not depend on how events merged.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/serve/stop_strings.h"
#include "apps/common/utf8_text.h"
#include "data/tokenizer/tokenizer.h"
#include "inference/engine/engine.h"

namespace ember::apps::serve {

// One token's log-probability as the API shows it.
struct LogprobEntry {
  std::string token;              // its bytes (may hold part of a character)
  std::optional<double> logprob;  // none: the prompt's first token (nothing before it)
  std::vector<std::pair<std::string, double>> top;  // most likely first
  size_t text_offset = 0;                           // characters of the text before the token
};

struct OutputDelta {
  std::string text;                           // new output text
  std::vector<LogprobEntry> logprobs;         // one per new token, when logprobs were asked for
  std::vector<LogprobEntry> prompt_logprobs;  // the prompt's, in the first delta (echo)
  bool finished = false;
  std::string finish_reason;    // "stop", "length" or "cancelled" (the engine cancelled it)
  bool by_stop_string = false;  // the caller cancels the engine request
};

// The bytes of one token; "" for an id outside the tokenizer (padding rows of the vocabulary).
std::string token_text(const data::Tokenizer& tok, int64_t id);

class OutputAssembler {
 public:
  // text_offset0: characters before the output (the echoed prompt's).
  OutputAssembler(const data::Tokenizer& tok, std::vector<std::string> stops,
                  size_t text_offset0 = 0);
  OutputDelta on_event(const inference::EngineEvent& ev);
  bool finished() const { return finished_; }
  int64_t completion_tokens() const { return completion_tokens_; }  // up to the stop string's end
  int64_t prompt_tokens() const { return prompt_tokens_; }

 private:
  LogprobEntry entry(const inference::TokenLogprob& lp, size_t offset) const;
  void take_token(int64_t token, const inference::TokenLogprob* lp, OutputDelta& out);

  const data::Tokenizer& tok_;
  StopMatcher stop_;
  Utf8Assembler utf8_;
  size_t chars_ = 0;  // characters of every token's bytes so far (text_offset)
  int64_t completion_tokens_ = 0, prompt_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace ember::apps::serve
