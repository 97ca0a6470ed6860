// check_integer_options: a decimal check and normalisation before CLI11's own
// conversion (see integer_options.h).
#include "apps/cli/integer_options.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace ember::apps {
namespace {

// Accepts [+-]digits within int64 (or, unsigned, [+]digits within uint64) and
// rewrites the value without leading zeros, so that CLI11 never reads it as octal.
CLI::Validator decimal_integer(bool is_unsigned) {
  const std::string range = is_unsigned ? "an integer in [0, 2^64 - 1]" : "an integer in [-2^63, 2^63 - 1]";
  return CLI::Validator(
      [is_unsigned, range](std::string& value) -> std::string {
        const size_t sign = !value.empty() && (value[0] == '+' || (!is_unsigned && value[0] == '-')) ? 1 : 0;
        const bool digits = value.size() > sign && value.find_first_not_of("0123456789", sign) == std::string::npos;
        if (!digits) return "expected " + range + ", got '" + value + "'";
        errno = 0;
        char* end = nullptr;
        const std::string text = is_unsigned ? std::to_string(std::strtoull(value.c_str(), &end, 10))
                                             : std::to_string(std::strtoll(value.c_str(), &end, 10));
        if (errno == ERANGE) return "expected " + range + ", got " + value;
        value = text;
        return "";
      },
      "" /* no change to --help */);
}

}  // namespace

void check_integer_options(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type.rfind("INT", 0) == 0) opt->transform(decimal_integer(false));
    if (type.rfind("UINT", 0) == 0) opt->transform(decimal_integer(true));
  }
  for (CLI::App* sub : app.get_subcommands({})) check_integer_options(*sub);
}

}  // namespace ember::apps
