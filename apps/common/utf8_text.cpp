// UTF-8 boundaries for streamed text (apps/common/utf8_text.h).
#include "apps/common/utf8_text.h"

#include <algorithm>

namespace ember::apps {

size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(4, s.size()); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: its lead is further back
    const size_t need = c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;  // only continuation bytes (not UTF-8): nothing to wait for
}

namespace {

// The character at s[i]: its length and whether it is well formed; when it is not, the
// length of its maximal subpart (the longest prefix of a well-formed sequence, at least 1).
struct Utf8Step {
  size_t length = 1;
  bool valid = true;
};

Utf8Step utf8_step(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {1, true};
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte (table 3-7)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong form
    if (c == 0xED) hi = 0x9F;  // no surrogate
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // no overlong form
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {1, false};  // a continuation byte, C0, C1 or F5..FF
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return {k, false};
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if (b < lo || b > hi) return {k, false};
    lo = 0x80;
    hi = 0xBF;
  }
  return {n, true};
}

}  // namespace

size_t first_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const Utf8Step step = utf8_step(s, i);
    if (!step.valid) return i;
    i += step.length;
  }
  return std::string_view::npos;
}

std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Step step = utf8_step(s, i);
    if (step.valid) {
      out.append(s.substr(i, step.length));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    i += step.length;
  }
  return out;
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

}  // namespace ember::apps
