// Incremental detokenization that never splits a UTF-8 character: a token can
// end inside a character (byte-level BPE), so the bytes of an unfinished
// character at the end are held until the next token completes them.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ember::apps::serve {

// How many bytes at the end of s start a character that is not complete yet (0..3).
size_t incomplete_utf8_tail(std::string_view s);

// Characters in s (bytes that are not UTF-8 continuation bytes): Python's len()
// of valid UTF-8, the unit of OpenAI's text_offset.
size_t utf8_length(std::string_view s);

class Utf8Assembler {
 public:
  // Appends bytes; returns every complete character not returned before.
  std::string push(std::string_view bytes);
  // The bytes still held (an unfinished character at the end of the output).
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace ember::apps::serve
