// UTF-8 for generated text, shared by `ember serve` and the CLI (generate, chat,
// bench-serve): incremental detokenization that never splits a character (a token
// can end inside one, byte-level BPE, so an unfinished character's bytes are held
// until the next token completes them), and the check and repair of invalid bytes.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ember::apps {

// How many bytes at the end of s start a character that is not complete yet (0..3).
size_t incomplete_utf8_tail(std::string_view s);

// Characters in s (bytes that are not UTF-8 continuation bytes): Python's len()
// of valid UTF-8, the unit of OpenAI's text_offset.
size_t utf8_length(std::string_view s);

// The offset of the first byte of s that is not part of a well-formed UTF-8 character
// (Unicode's table 3-7: no overlong form, surrogate or code point above U+10FFFF; a
// character cut off by the end of s is not well formed); npos when all of s is valid.
size_t first_invalid_utf8(std::string_view s);

// s with each ill-formed sequence (each maximal subpart, Unicode's recommended practice)
// replaced by U+FFFD: the bytes nlohmann::json's dump writes with error_handler_t::replace,
// which serve's responses use (apps/serve/api_error.h).
std::string replace_invalid_utf8(std::string_view s);

class Utf8Assembler {
 public:
  // Appends bytes; returns every complete character not returned before.
  std::string push(std::string_view bytes);
  // The bytes still held (an unfinished character at the end of the output).
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace ember::apps
