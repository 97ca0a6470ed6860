// The Unicode class tables of data/tokenizer/unicode_class.h: the two-stage table
// generated at build time, and the ASCII fast path (letters, digits, the six
// ASCII White_Space characters; everything else, 0x1C-0x1F included, is Other).
#include "data/tokenizer/unicode_class.h"

#include <array>

namespace ember::data {

#include "unicode_classes.inc"

namespace {
constexpr std::array<uint8_t, 128> make_ascii_class() {
  std::array<uint8_t, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) t[c] = 1;
    else if (c >= '0' && c <= '9') t[c] = 2;
    else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) t[c] = 3;
  }
  return t;
}
constexpr std::array<uint8_t, 128> kAscii = make_ascii_class();
}  // namespace

const uint8_t ascii_class[128] = {
#define EMBER_ROW(b) kAscii[b], kAscii[b + 1], kAscii[b + 2], kAscii[b + 3], \
                     kAscii[b + 4], kAscii[b + 5], kAscii[b + 6], kAscii[b + 7],
    EMBER_ROW(0) EMBER_ROW(8) EMBER_ROW(16) EMBER_ROW(24) EMBER_ROW(32) EMBER_ROW(40)
    EMBER_ROW(48) EMBER_ROW(56) EMBER_ROW(64) EMBER_ROW(72) EMBER_ROW(80) EMBER_ROW(88)
    EMBER_ROW(96) EMBER_ROW(104) EMBER_ROW(112) EMBER_ROW(120)
#undef EMBER_ROW
};

}  // namespace ember::data
