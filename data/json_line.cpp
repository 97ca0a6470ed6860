// parse_json_line: nlohmann::json's two parse failures turned into one-line Errors.
#include "data/json_line.h"

#include <string>

#include "core/error.h"

namespace ember::data {

nlohmann::json parse_json_line(std::string_view line, std::string_view where, std::string_view number_hint) {
  using nlohmann::json;
  try {
    return json::parse(line);
  } catch (const json::parse_error& e) {
    throw Error(detail::concat(where, ": not JSON (syntax error at byte ", e.byte, ")"));
  } catch (const json::out_of_range& e) {  // 1e999: nlohmann refuses numbers beyond a double
    const std::string what = e.what();     // "[json.exception.out_of_range.406] number overflow ..."
    const std::string hint = number_hint.empty() ? "" : detail::concat(" (", number_hint, ")");
    throw Error(detail::concat(where, ": ", what.substr(what.find(']') + 2), hint));
  }
}

}  // namespace ember::data
