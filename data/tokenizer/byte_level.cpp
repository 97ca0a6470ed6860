// GPT-2's bytes_to_unicode table and the conversions between token bytes and
// byte-level strings (see data/tokenizer/byte_level.h).
#include "data/tokenizer/byte_level.h"

#include <array>

namespace ember::data {
namespace {

struct ByteLevelTables {
  std::array<uint32_t, 256> code_point{};
  std::array<int16_t, 324> byte_of{};  // code point -> byte, -1 when none (all are < 324)
  std::array<std::string, 256> utf8;
  ByteLevelTables() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      code_point[b] = printable ? static_cast<uint32_t>(b) : next++;
      byte_of[code_point[b]] = static_cast<int16_t>(b);
      const uint32_t cp = code_point[b];
      if (cp < 0x80) {
        utf8[b] = std::string(1, static_cast<char>(cp));
      } else {  // all code points are below 0x800: two bytes
        utf8[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

uint32_t byte_level_code_point(uint8_t b) { return tables().code_point[b]; }

std::string byte_level_encode(std::string_view bytes) {
  const auto& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.utf8[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view text) {
  const auto& t = tables();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c0 = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((c0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;
    }
    if (cp >= t.byte_of.size() || t.byte_of[cp] < 0) return std::nullopt;
    out += static_cast<char>(t.byte_of[cp]);
  }
  return out;
}

}  // namespace ember::data
