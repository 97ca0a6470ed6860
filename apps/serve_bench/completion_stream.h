// One streamed completion as the client sees it: the SSE chunks of
// /v1/completions or /v1/chat/completions read incrementally, recording the
// arrival time of every chunk that carries text (choices[0].text, or
// choices[0].delta.content for chat), the usage chunk's token counts, the
// closing "data: [DONE]", and the first problem (an error object, a chunk that
// is not JSON) as one message.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "apps/serve_bench/sse_parser.h"

namespace ember::apps {

enum class ServeEndpoint { Completions, Chat };

class CompletionStream {
 public:
  explicit CompletionStream(ServeEndpoint endpoint) : endpoint_(endpoint) {}

  // Bytes of the body received `seconds` after the request was sent.
  void receive(std::string_view bytes, double seconds);

  bool done() const { return done_; }  // "[DONE]" arrived
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }                          // the first problem
  const std::vector<double>& content_times() const { return content_times_; }  // s after send
  int64_t output_tokens() const { return output_tokens_; }  // usage.completion_tokens, -1 if none
  int64_t prompt_tokens() const { return prompt_tokens_; }  // usage.prompt_tokens, -1 if none
  bool has_partial_event() const { return parser_.has_partial_event(); }

 private:
  void on_event(const std::string& data, double seconds);

  ServeEndpoint endpoint_;
  SseParser parser_;
  bool done_ = false;
  std::string error_;
  std::vector<double> content_times_;
  int64_t output_tokens_ = -1, prompt_tokens_ = -1;
};

}  // namespace ember::apps
