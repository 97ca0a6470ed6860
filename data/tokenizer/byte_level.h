// GPT-2's byte-level alphabet (bytes_to_unicode): every byte is shown as one
// printable Unicode character, so a token's bytes become a JSON-safe string.
// Printable Latin-1 bytes map to themselves, the other 68 to U+0100 onwards.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember::data {

// The code point that stands for byte b.
uint32_t byte_level_code_point(uint8_t b);
// Token bytes -> their byte-level string (UTF-8).
std::string byte_level_encode(std::string_view bytes);
// Byte-level string -> bytes; nullopt when it holds a character outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view text);

}  // namespace ember::data
