// Bearer key check (apps/serve/auth.h).
#include "apps/serve/auth.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace ember::apps::serve {

bool constant_time_equal(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  uint64_t diff = a.size() ^ b.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<uint64_t>(x ^ y);
  }
  return diff == 0;
}

bool authorized(std::string_view authorization, std::string_view key) {
  if (key.empty()) return true;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  }
  std::string_view given = authorization.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  return constant_time_equal(given, key);
}

}  // namespace ember::apps::serve
