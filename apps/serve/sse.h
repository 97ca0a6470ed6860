// Server-sent events framing of streamed responses: each JSON chunk is one
// event `data: <json>\n\n`, the stream ends with `data: [DONE]\n\n`; a comment
// line (`: ...\n\n`, ignored by SSE clients) keeps an idle stream alive and
// shows whether the client is still there.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace ember::apps::serve {

std::string sse_event(const nlohmann::ordered_json& chunk);
std::string sse_event(const nlohmann::json& chunk);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
inline constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

}  // namespace ember::apps::serve
