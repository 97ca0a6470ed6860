// One submitted generation written to its client: streamed as server-sent
// events (the first chat chunk holds the role; a chunk per engine event; the
// final chunk with finish_reason; the usage chunk when asked; [DONE]) or as
// one JSON body, written as it is made or returned whole once the generation
// ends (for a response with a Content-Length). A failed write or liveness probe
// means the client went away: the engine request is cancelled, so its KV blocks
// are freed at the next step. A stop string cancels it too, once the text
// before it is out.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "apps/serve/output_assembler.h"
#include "apps/serve/request_parse.h"
#include "apps/serve/response_json.h"
#include "apps/serve/serve_state.h"
#include "inference/engine/engine.h"

namespace ember::apps::serve {

class GenerationRun {
 public:
  // Writes text to the client; false when the client is gone.
  using Writer = std::function<bool(const std::string&)>;

  GenerationRun(std::shared_ptr<inference::RequestHandle> handle, const ApiRequest& request,
                std::string echo_text, int64_t prompt_tokens, ResponseMeta meta, ServeState& state);
  ~GenerationRun();  // cancels the engine request if it did not finish
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  // Both return false when the client went away.
  bool stream(const Writer& write);
  bool whole(const Writer& write);

  // Whether the client is still there; false cancels the request.
  using Probe = std::function<bool()>;
  struct WholeBody {
    int status = 200;  // 503 when the server shut down before the output was complete
    std::string json;
  };
  // The whole JSON body once the generation has ended, writing nothing: `alive` is asked
  // at each keep-alive interval instead. nullopt: the client went away.
  std::optional<WholeBody> whole_body(const Probe& alive);

 private:
  // The next engine output; calls `keep_alive` whenever nothing was written for the
  // interval. nullopt: the keep-alive found the client gone.
  std::optional<OutputDelta> next_delta(const Probe& keep_alive,
                                        std::chrono::milliseconds interval);
  bool write_checked(const Writer& write, const std::string& text);
  void finish(const std::string& reason);
  ojson usage() const;

  std::shared_ptr<inference::RequestHandle> handle_;
  Endpoint endpoint_;
  bool echo_, wants_logprobs_, include_usage_;
  std::string echo_text_;
  int64_t prompt_tokens_;
  ResponseMeta meta_;
  ServeState& state_;
  OutputAssembler out_;
  bool done_ = false;
  std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
};

}  // namespace ember::apps::serve
