// ScopedEnv: sets (or, with nullptr, unsets) an environment variable for one scope and
// restores it after; ember programs a test starts meanwhile inherit the value.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace ember::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace ember::testing
