// SSE framing (apps/serve/sse.h). JSON text has no raw newline, so one data line holds a chunk.
#include "apps/serve/sse.h"

#include "apps/serve/api_error.h"

namespace ember::apps::serve {

std::string sse_event(const nlohmann::ordered_json& chunk) {
  return "data: " + json_text(chunk) + "\n\n";
}
std::string sse_event(const nlohmann::json& chunk) {
  return "data: " + json_text(chunk) + "\n\n";
}

}  // namespace ember::apps::serve
