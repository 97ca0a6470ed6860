// UTF-8 boundaries for streamed text (apps/serve/utf8_text.h).
#include "apps/serve/utf8_text.h"

#include <algorithm>

namespace ember::apps::serve {

size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(4, s.size()); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: its lead is further back
    const size_t need = c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;  // only continuation bytes (not UTF-8): nothing to wait for
}

size_t utf8_length(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string Utf8Assembler::push(std::string_view bytes) {
  pending_ += bytes;
  const size_t keep = incomplete_utf8_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string Utf8Assembler::finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace ember::apps::serve
