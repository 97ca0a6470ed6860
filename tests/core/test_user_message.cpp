// apps/user_message: the one line `ember` prints for an exception the library
// raised itself (out of memory, too large a size, filesystem, JSON).
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/user_message.h"
#include "core/error.h"

using ember::user_message;

TEST_CASE("user_message keeps ember errors and rewrites the library's own", "[cli][messages]") {
  CHECK(user_message(ember::Error("x.h5: bad"), "eval") == "x.h5: bad");
  const std::string oom = user_message(std::bad_alloc(), "eval");
  CHECK(oom.starts_with("out of memory while running `ember eval`"));
  const std::string big = user_message(std::length_error("basic_string::_M_create"), "import");
  CHECK(big.find("too large") != std::string::npos);
  CHECK(big.find("_M_create") == std::string::npos);
  const std::filesystem::filesystem_error fe("filesystem error: cannot create directories", "/a/b",
                                             std::make_error_code(std::errc::not_a_directory));
  CHECK(user_message(fe, "tokenize") == "/a/b: " + std::make_error_code(std::errc::not_a_directory).message() +
                                            " while running `ember tokenize`");
  try {
    [[maybe_unused]] const nlohmann::json j = nlohmann::json::parse("{");
    FAIL("no parse error");
  } catch (const std::exception& e) {
    const std::string m = user_message(e, "import");
    CHECK(m.starts_with("invalid JSON while running `ember import`: "));
    CHECK(m.find("[json.exception") == std::string::npos);
  }
}
