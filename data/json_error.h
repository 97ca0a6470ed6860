// The message of a JSON library error without the library's tag: nlohmann's
// "[json.exception.parse_error.101] parse error at line 1, column 3: ..." becomes
// "parse error at line 1, column 3: ...", for errors that name the file first.
#pragma once
#include <string>

namespace ember {

inline std::string json_error_text(std::string what) {
  if (what.rfind("[json.exception.", 0) == 0) {
    const size_t end = what.find("] ");
    if (end != std::string::npos) what.erase(0, end + 2);
  }
  return what;
}

}  // namespace ember
