// UTF-8 validity check, built on the strict decoder of data/tokenizer/unicode_class.h
// (overlong forms, surrogates and truncated sequences are invalid).
#pragma once
#include <string_view>

#include "data/tokenizer/unicode_class.h"

namespace ember::data {

inline bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const Utf8Char c = next_utf8_char(p, end);
    if (c.len == 1) return false;
    p += c.len;
  }
  return true;
}

}  // namespace ember::data
