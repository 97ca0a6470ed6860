// Grad mode: while disabled (NoGradGuard), ops record no graph. Per thread.
#pragma once

namespace ember {

bool grad_enabled();
void set_grad_enabled(bool enabled);

// RAII: disables recording for its scope, restoring the previous mode after.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace ember
