// Exception -> one user-facing line (see user_message.h).
#include "core/user_message.h"

#include <filesystem>
#include <new>
#include <stdexcept>

#include "core/error.h"
#include "core/io/json_message.h"

namespace ember::apps {

std::string user_message(const std::exception& e, const std::string& command) {
  const std::string during = command.empty() ? "" : " while running `ember " + command + "`";
  if (dynamic_cast<const Error*>(&e)) return e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e)) {
    return "out of memory" + during + ": a size given as an option or read from a file needs more memory than this "
           "machine has";
  }
  if (dynamic_cast<const std::length_error*>(&e)) {  // "basic_string::_M_create", "vector::reserve"
    return "a size given as an option or read from a file is too large" + during;
  }
  if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    std::string where = fe->path1().string();
    if (!fe->path2().empty()) where += " -> " + fe->path2().string();
    return (where.empty() ? std::string("a file") : where) + ": " + fe->code().message() + during;
  }
  const std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) return "invalid JSON" + during + ": " + json_message(what);
  return what;
}

}  // namespace ember::apps
