// ember::Error and EMBER_CHECK: the one way library code reports bad input.
// The library never exits; `main` turns an Error into one stderr line.
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// "[2, 3]" for a shape or any list of integers.
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace ember

// Throws ember::Error with the parts streamed together when cond is false.
#define EMBER_CHECK(cond, ...)                                           \
  do {                                                                   \
    if (!(cond)) throw ::ember::Error(::ember::detail::concat(__VA_ARGS__)); \
  } while (0)
