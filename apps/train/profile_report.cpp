// Profiler report (see profile_report.h).
#include "apps/train/profile_report.h"

#include <algorithm>
#include <cstdio>

namespace ember::apps {

namespace {

using prof::Family;
using prof::Phase;

bool is_outside(Phase p) { return p == prof::kOutsidePhase; }

double per_step(const prof::Snapshot& s, double v) { return v / static_cast<double>(std::max<int64_t>(1, s.steps)); }
double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

std::string line(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace

std::string profile_table(const prof::Snapshot& s, int64_t warmup_steps, double wall_ms_per_step) {
  const double total = per_step(s, s.total_seconds()) * 1e3;
  std::string out = line("profile: %lld step(s) after %lld warm-up step(s); %.2f ms/step inside phases",
                         static_cast<long long>(s.steps), static_cast<long long>(warmup_steps), total);
  if (wall_ms_per_step > 0) out += line(" (the step measured as the progress line does, batch to update: %.2f ms)", wall_ms_per_step);
  out += "\n";
  out += line("  %-14s %10s %7s\n", "phase", "ms/step", "%");
  for (const Phase p : prof::phases()) {
    if (is_outside(p) || s.calls_of(p) == 0) continue;
    const double ms = per_step(s, s.phase_seconds(p)) * 1e3;
    out += line("  %-14s %10.2f %6.1f%%\n", prof::phase_name(p), ms, percent(ms, total));
  }
  out += line("  %-14s %10s %7s %11s %10s %10s\n", "op family", "ms/step", "%", "calls/step", "fwd ms",
              "bwd ms");
  for (const Family fam : prof::families()) {
    const double ms = per_step(s, s.family_seconds(fam)) * 1e3;
    const int64_t calls = s.family_calls(fam);
    if (calls == 0 && ms < 0.005) continue;
    out += line("  %-14s %10.2f %6.1f%% %11.1f %10.2f %10.2f\n", prof::family_name(fam), ms, percent(ms, total),
                per_step(s, static_cast<double>(calls)), per_step(s, s.seconds_in(kForwardPhase, fam)) * 1e3,
                per_step(s, s.seconds_in(kBackwardPhase, fam)) * 1e3);
  }
  const double outside = per_step(s, s.phase_seconds(prof::kOutsidePhase)) * 1e3;
  if (outside > 0.005) {
    out += line("  outside phases (logging, evaluation, not in the split above): %.2f ms/step\n", outside);
  }
  return out;
}

nlohmann::json profile_json(const prof::Snapshot& s, int64_t warmup_steps, double wall_ms_per_step) {
  const double total = per_step(s, s.total_seconds()) * 1e3;
  nlohmann::json phases = nlohmann::json::object(), families = nlohmann::json::object();
  for (const Phase p : prof::phases()) {
    if (is_outside(p)) continue;
    const double ms = per_step(s, s.phase_seconds(p)) * 1e3;
    phases[prof::phase_name(p)] = {{"ms_per_step", ms},
                                   {"percent", percent(ms, total)},
                                   {"calls_per_step", per_step(s, static_cast<double>(s.calls_of(p)))}};
  }
  for (const Family fam : prof::families()) {
    const double ms = per_step(s, s.family_seconds(fam)) * 1e3;
    nlohmann::json by_phase = nlohmann::json::object();
    for (const Phase p : prof::phases()) {
      if (!is_outside(p) && s.seconds_in(p, fam) > 0) {
        by_phase[prof::phase_name(p)] = per_step(s, s.seconds_in(p, fam)) * 1e3;
      }
    }
    families[prof::family_name(fam)] = {
        {"ms_per_step", ms}, {"percent", percent(ms, total)},
        {"calls_per_step", per_step(s, static_cast<double>(s.family_calls(fam)))},
        {"ms_per_step_by_phase", by_phase}};
  }
  return {{"steps", s.steps},
          {"warmup_steps", warmup_steps},
          {"ms_per_step", total},
          {"wall_ms_per_step", wall_ms_per_step},
          {"outside_phases_ms_per_step", per_step(s, s.phase_seconds(prof::kOutsidePhase)) * 1e3},
          {"phases", phases},
          {"families", families}};
}

}  // namespace ember::apps
