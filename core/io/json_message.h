// nlohmann-json's exception text without its "[json.exception.parse_error.101]"
// tag, so that a caller can rethrow it as ember::Error naming the file:
// "parse error at line 1, column 5: syntax error ..." -> "line 1, column 5: syntax error ...".
#pragma once
#include <string>

namespace ember {

std::string json_message(const std::string& what);

}  // namespace ember
