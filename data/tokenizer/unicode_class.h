// Character classes of the GPT-2 pre-tokenizer (letter, number, White_Space,
// other) for one UTF-8 character, with strict UTF-8 decoding: a byte that does
// not start a well-formed sequence is one character of class Other.
// The tables come from Debian's unicode-data at build time.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::data {

enum class CharClass : uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

extern const uint16_t unicode_class_stage1[];
extern const uint8_t unicode_class_stage2[];
extern const uint8_t ascii_class[128];

// Class of a code point (< 0x110000).
inline CharClass code_point_class(uint32_t cp) {
  return static_cast<CharClass>(unicode_class_stage2[unicode_class_stage1[cp >> 8] * 256 + (cp & 255)]);
}

struct Utf8Char {
  CharClass cls;
  uint32_t len;  // bytes consumed, 1 to 4
};

// Decodes the character at p (p < end). Overlong forms, surrogates, values above
// U+10FFFF and truncated sequences give {Other, 1}: the byte stands alone.
inline Utf8Char next_utf8_char(const uint8_t* p, const uint8_t* end) {
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {static_cast<CharClass>(ascii_class[b0]), 1};
  const ptrdiff_t left = end - p;
  auto cont = [](uint8_t b) { return (b & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (left >= 2 && cont(p[1])) return {code_point_class(((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu)), 2};
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left >= 3 && cont(p[1]) && cont(p[2])) {
      const uint32_t cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
      if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {code_point_class(cp), 3};
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left >= 4 && cont(p[1]) && cont(p[2]) && cont(p[3])) {
      const uint32_t cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
                          (p[3] & 0x3Fu);
      if (cp >= 0x10000 && cp <= 0x10FFFF) return {code_point_class(cp), 4};
    }
  }
  return {CharClass::Other, 1};
}

}  // namespace ember::data
