// The progress line and bar of `ember train` (see progress.h).
#include "apps/train/step_progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "dist/communicator.h"

namespace ember::apps {
namespace {

std::string printf_string(const char* format, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

int terminal_width(std::FILE* out) {
  winsize w{};
  if (ioctl(fileno(out), TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

}  // namespace

std::string format_eta(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  return printf_string("%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

std::string format_step_line(const StepReport& r) {
  std::string line = printf_string(
      "step %6lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | %.0f ms | ",
      static_cast<long long>(r.step), static_cast<long long>(r.steps), r.loss, r.lr, r.grad_norm,
      r.tokens_per_s, r.ms_per_step);
  if (!std::isnan(r.mfu)) line += printf_string("MFU %.1f%% | ", 100 * r.mfu);  // NaN: not measured
  line += "ETA " + format_eta(r.eta_s);
  if (r.idle) line += printf_string(" | bubble %.1f%%", 100 * *r.idle);
  if (r.reward) line += printf_string(" | reward %.3f", *r.reward);
  if (r.has_val && r.val_reward) {
    line += printf_string(" | val reward %.3f", *r.val_reward);
    if (r.val_exact) line += printf_string(" (exact %.3f)", *r.val_exact);
  } else if (r.has_val && r.val_accuracy)
    line += printf_string(" | val %.4f (reward accuracy %.3f)", r.val_loss, *r.val_accuracy);
  else if (r.has_val)
    line += printf_string(" | val %.4f (%.3f %s)", r.val_loss, r.val_bits,
                          r.val_per_byte ? "bpb" : "bits/token");
  return line;
}

std::string format_step_bar(const StepReport& r, int width) {
  constexpr int kBar = 10;  // short enough that the whole bar fits 80 columns
  const double frac =
      r.steps > 0 ? std::clamp(static_cast<double>(r.step) / static_cast<double>(r.steps), 0.0, 1.0)
                  : 0;
  const int filled = static_cast<int>(frac * kBar);
  std::string bar = "[";
  bar.append(static_cast<size_t>(filled), '#')
      .append(static_cast<size_t>(kBar - filled), '.')
      .append("] ");
  bar += printf_string("%lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  ETA %s",
                       static_cast<long long>(r.step), static_cast<long long>(r.steps), r.loss,
                       r.lr, r.tokens_per_s, format_eta(r.eta_s).c_str());
  if (static_cast<int>(bar.size()) > width) bar.resize(static_cast<size_t>(std::max(width, 0)));
  return bar;
}

TrainProgress::TrainProgress(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

void TrainProgress::check_setting() {
  const char* env = std::getenv("EMBER_PROGRESS");
  const std::string mode = env ? env : "";
  EMBER_CHECK(mode.empty() || mode == "bar" || mode == "plain",
              "EMBER_PROGRESS must be bar or plain (or unset), got '", mode, "'");
}

bool TrainProgress::wants_bar() {
  check_setting();
  const char* env = std::getenv("EMBER_PROGRESS");
  const std::string mode = env ? env : "";
  if (mode == "plain" || !isatty(fileno(stdout))) return false;
  if (mode == "bar") return true;
  const char* term = std::getenv("TERM");
  return !(term && std::strcmp(term, "dumb") == 0) && !dist::Communicator::launched_by_mpirun();
}

void TrainProgress::step(const StepReport& r, bool log_line) {
  if (log_line) {
    clear();
    std::fprintf(out_, "%s\n", format_step_line(r).c_str());
  }
  const auto now = std::chrono::steady_clock::now();
  const bool draw = terminal_ && (log_line || r.step == r.steps ||
                                  now - last_draw_ >= std::chrono::milliseconds(100));
  if (draw) {
    // One column short of the width: writing the last column would wrap on some terminals.
    std::fprintf(out_, "\r%s\033[K", format_step_bar(r, terminal_width(out_) - 1).c_str());
    bar_shown_ = true;
    last_draw_ = now;
  }
  if (log_line || draw) std::fflush(out_);
}

void TrainProgress::clear() {
  if (!bar_shown_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  bar_shown_ = false;
}

}  // namespace ember::apps
