// Strips nlohmann-json's "[json.exception.KIND.ID] " tag and "parse error at " lead.
#include "core/io/json_message.h"

namespace ember {

std::string json_message(const std::string& what) {
  std::string s = what;
  if (s.starts_with("[json.exception.")) {
    const size_t end = s.find("] ");
    if (end != std::string::npos) s.erase(0, end + 2);
  }
  for (const char* lead : {"parse error at ", "parse error: "}) {
    if (s.starts_with(lead)) s.erase(0, std::char_traits<char>::length(lead));
  }
  return s;
}

}  // namespace ember
