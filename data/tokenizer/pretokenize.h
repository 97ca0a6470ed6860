// The GPT-2 pre-tokenizer, written out by hand instead of run as a regex:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with Unicode letter/number/White_Space classes (data/tokenizer/unicode_class.h). It
// splits any byte string; bytes that are not well-formed UTF-8 count as Other.
#pragma once
#include <string_view>

#include "data/tokenizer/unicode_class.h"

namespace ember::data {

// Calls emit(std::string_view piece) for each piece of text, in order; the
// pieces concatenate back to text exactly.
template <class Emit>
void pretokenize(std::string_view text, Emit&& emit) {
  const auto* base = reinterpret_cast<const uint8_t*>(text.data());
  const uint8_t* end = base + text.size();
  const uint8_t* p = base;
  auto piece = [&](const uint8_t* a, const uint8_t* b) {
    emit(std::string_view(reinterpret_cast<const char*>(a), static_cast<size_t>(b - a)));
  };
  // End of the run of characters of class cls starting at q.
  auto run_end = [end](const uint8_t* q, CharClass cls) {
    while (q < end) {
      if (*q < 0x80) {
        if (static_cast<CharClass>(ascii_class[*q]) != cls) break;
        ++q;
        continue;
      }
      const Utf8Char c = next_utf8_char(q, end);
      if (c.cls != cls) break;
      q += c.len;
    }
    return q;
  };
  while (p < end) {
    const uint8_t b = *p;
    if (b == '\'' && end - p >= 2) {  // contractions, case-sensitive as in GPT-2
      const uint8_t c1 = p[1];
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        piece(p, p + 2);
        p += 2;
        continue;
      }
      if (end - p >= 3 && ((c1 == 'r' && p[2] == 'e') || (c1 == 'v' && p[2] == 'e') ||
                           (c1 == 'l' && p[2] == 'l'))) {
        piece(p, p + 3);
        p += 3;
        continue;
      }
    }
    const Utf8Char c = next_utf8_char(p, end);
    if (c.cls != CharClass::Space) {  // \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
      const uint8_t* q = run_end(p + c.len, c.cls);
      piece(p, q);
      p = q;
      continue;
    }
    if (b == ' ' && p + 1 < end) {  // ' ?' before a letter, number or other run
      const Utf8Char next = next_utf8_char(p + 1, end);
      if (next.cls != CharClass::Space) {
        const uint8_t* q = run_end(p + 1 + next.len, next.cls);
        piece(p, q);
        p = q;
        continue;
      }
    }
    // \s+(?!\S) takes the whitespace run but its last character when a
    // non-space follows; a single whitespace character falls to \s+.
    const uint8_t* q = p + c.len;
    const uint8_t* last = p;
    while (q < end) {
      const Utf8Char w = next_utf8_char(q, end);
      if (w.cls != CharClass::Space) break;
      last = q;
      q += w.len;
    }
    if (q < end && last > p) q = last;
    piece(p, q);
    p = q;
  }
}

}  // namespace ember::data
