// format_progress: the progress line of data/job_progress.h, a bar for terminals
// and a plain line for logs.
#include "data/job_progress.h"

#include <cmath>
#include <cstdio>

namespace ember::data {
namespace {

std::string clock(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

}  // namespace

std::string format_progress(const Progress& p, bool terminal) {
  const double rate = p.seconds > 0 ? p.done / p.seconds : 0;
  const double frac = p.total ? std::min(1.0, double(p.done) / p.total) : 0;
  const double eta = rate > 0 && p.total ? (p.total - std::min(p.done, p.total)) / rate : -1;
  char rate_text[48], amount[64];
  if (p.bytes) {
    std::snprintf(rate_text, sizeof rate_text, "%.1f MB/s", rate / 1e6);
    std::snprintf(amount, sizeof amount, "%.1f/%.1f MB", p.done / 1e6, p.total / 1e6);
  } else {
    std::snprintf(rate_text, sizeof rate_text, "%.0f/s", rate);
    std::snprintf(amount, sizeof amount, "%llu/%llu", static_cast<unsigned long long>(p.done),
                  static_cast<unsigned long long>(p.total));
  }
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3.0f%%", 100 * frac);
  std::string out = p.stage;
  out += ' ';
  if (terminal) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    out.append("[").append(filled, '#').append(kWidth - filled, '.').append("] ");
    out.append(pct).append("  ").append(rate_text).append("  ETA ");
  } else {
    out.append(pct).append(" ").append(amount).append(" ").append(rate_text).append(" ETA ");
  }
  out += clock(eta);
  if (p.tokens) out.append("  ").append(std::to_string(p.tokens)).append(" tokens");
  return out;
}

}  // namespace ember::data
