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

// The channels' traffic (tp_all_reduce, ...): per phase and over the phases, per step.
std::string traffic_table(const prof::Snapshot& s) {
  std::string out;
  for (const prof::Channel c : prof::channels()) {
    const prof::Traffic all = s.channel_traffic(c);
    if (all.calls == 0) continue;
    if (out.empty()) {
      out = line("  %-14s %-10s %10s %14s %10s  (time also in the op families above)\n",
                 "collective", "phase", "calls/step", "bytes/step", "ms/step");
    }
    const auto row = [&](const char* phase, const prof::Traffic& t) {
      out += line("  %-14s %-10s %10.1f %14.0f %10.2f\n", prof::channel_name(c), phase,
                  per_step(s, static_cast<double>(t.calls)),
                  per_step(s, static_cast<double>(t.bytes)), per_step(s, t.seconds) * 1e3);
    };
    for (const Phase p : prof::phases()) {
      const prof::Traffic& t = s.traffic_in(p, c);
      if (!is_outside(p) && t.calls > 0) row(prof::phase_name(p), t);
    }
    row("(all)", all);
  }
  return out;
}

nlohmann::json traffic_json(const prof::Traffic& t, const prof::Snapshot& s) {
  return {{"calls", t.calls},
          {"bytes", t.bytes},
          {"calls_per_step", per_step(s, static_cast<double>(t.calls))},
          {"bytes_per_step", per_step(s, static_cast<double>(t.bytes))},
          {"ms_per_step", per_step(s, t.seconds) * 1e3}};
}

// {"tp_all_reduce": {calls, bytes (over the profiled steps), ..._per_step, "by_phase": {...}}}.
nlohmann::json channels_json(const prof::Snapshot& s) {
  nlohmann::json out = nlohmann::json::object();
  for (const prof::Channel c : prof::channels()) {
    const prof::Traffic all = s.channel_traffic(c);
    if (all.calls == 0) continue;
    nlohmann::json entry = traffic_json(all, s), by_phase = nlohmann::json::object();
    for (const Phase p : prof::phases()) {
      const prof::Traffic& t = s.traffic_in(p, c);
      if (!is_outside(p) && t.calls > 0) by_phase[prof::phase_name(p)] = traffic_json(t, s);
    }
    entry["by_phase"] = by_phase;
    out[prof::channel_name(c)] = entry;
  }
  return out;
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
  out += traffic_table(s);
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
          {"families", families},
          {"traffic", channels_json(s)}};
}

}  // namespace ember::apps
