// CompletionStream: each SSE event's JSON read for text, usage, errors and [DONE].
#include "apps/serve_bench/completion_stream.h"

#include <nlohmann/json.hpp>

namespace ember::apps {

namespace {

using nlohmann::json;

// The text a chunk's first choice carries ("" when none).
std::string chunk_text(const json& chunk, ServeEndpoint endpoint) {
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return "";
  const json& choice = choices->front();
  const json* holder = &choice;
  if (endpoint == ServeEndpoint::Chat) {
    const auto delta = choice.find("delta");
    if (delta == choice.end() || !delta->is_object()) return "";
    holder = &*delta;
  }
  const auto text = holder->find(endpoint == ServeEndpoint::Chat ? "content" : "text");
  return text != holder->end() && text->is_string() ? text->get<std::string>() : "";
}

int64_t usage_count(const json& usage, const char* name) {
  const auto v = usage.find(name);
  return v != usage.end() && v->is_number_integer() ? v->get<int64_t>() : -1;
}

}  // namespace

void CompletionStream::receive(std::string_view bytes, double seconds) {
  parser_.feed(bytes, [&](const std::string& data) { on_event(data, seconds); });
}

void CompletionStream::on_event(const std::string& data, double seconds) {
  if (done_ || failed()) return;
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) {
    error_ = "a stream chunk is not a JSON object: " + data.substr(0, 120);
    return;
  }
  if (const auto err = chunk.find("error"); err != chunk.end() && !err->is_null()) {
    const bool has_message =
        err->is_object() && err->contains("message") && err->at("message").is_string();
    error_ = "error in the stream: " +
             (has_message ? err->at("message").get<std::string>() : err->dump());
    return;
  }
  if (!chunk_text(chunk, endpoint_).empty()) content_times_.push_back(seconds);
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    output_tokens_ = usage_count(*usage, "completion_tokens");
    prompt_tokens_ = usage_count(*usage, "prompt_tokens");
  }
}

}  // namespace ember::apps
