// terminal_text: invalid UTF-8 replaced and control characters escaped for a
// terminal (apps/cli/terminal_text.h).
#include "apps/cli/terminal_text.h"

#include <cstdio>

#include "apps/common/utf8_text.h"

namespace ember::apps {

std::string terminal_text(std::string_view bytes) {
  const std::string text = replace_invalid_utf8(bytes);
  std::string out;
  out.reserve(text.size());
  char escape[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      std::snprintf(escape, sizeof escape, "\\x%02x", c);
      out += escape;
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // U+0080-U+009F (text is valid UTF-8)
      std::snprintf(escape, sizeof escape, "\\u%04x", next);
      out += escape;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace ember::apps
