// Nice axis ticks and their labels (see axis_ticks.h).
#include "apps/plot/axis_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace ember::apps {
namespace {

// A nice step: 1, 2, 5 or 10 x 10^k nearest to x (Heckbert, "Nice numbers for
// graph labels", Graphics Gems 1990, applied to range / (target - 1) directly,
// not to a nice range first, which can leave 40% of an axis empty).
double nice_step(double x) {
  const double e = std::floor(std::log10(x));
  const double f = x / std::pow(10.0, e);
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * std::pow(10.0, e);
}

std::string printf_string(const char* format, double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, digits, value);
  return buf;
}

std::string strip_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// The fewest significant digits that give the value back (to 1e-9 relative).
std::string shortest(double v) {
  for (int digits = 1; digits < 17; ++digits) {
    const std::string s = printf_string("%.*g", v, digits);
    if (std::fabs(std::stod(s) - v) <= 1e-9 * std::fabs(v)) return s;
  }
  return printf_string("%.*g", v, 17);
}

}  // namespace

Ticks nice_ticks(double lo, double hi, int target) {
  EMBER_CHECK(std::isfinite(lo) && std::isfinite(hi), "axis range [", lo, ", ", hi,
              "] is not finite");
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  target = std::max(target, 2);
  Ticks t;
  t.step = nice_step((hi - lo) / (target - 1));
  const double first = std::floor(lo / t.step + 1e-9), last = std::ceil(hi / t.step - 1e-9);
  for (double k = first; k <= last + 0.5; k += 1) {
    const double v = k * t.step;
    t.values.push_back(v == 0 ? 0.0 : v);  // no "-0"
  }
  t.lo = t.values.front(), t.hi = t.values.back();
  return t;
}

Ticks log_ticks(double lo, double hi) {
  EMBER_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo > 0 && hi > 0, "log axis range [", lo,
              ", ", hi, "] must be positive and finite");
  if (lo > hi) std::swap(lo, hi);
  if (hi / lo < 10) {
    Ticks linear = nice_ticks(lo, hi, 5);
    if (linear.lo > 0) return linear;
  }
  Ticks t;
  t.step = 0;
  for (const bool decades_only : {false, true}) {
    const int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
    const int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
    std::vector<double> candidates;
    for (int e = e0; e <= e1; ++e) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (!decades_only || m == 1.0) candidates.push_back(m * std::pow(10.0, e));
      }
    }
    // The largest candidate <= lo through the smallest >= hi.
    size_t first = 0, last = candidates.size() - 1;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i] <= lo * (1 + 1e-9)) first = i;
    }
    for (size_t i = candidates.size(); i-- > 0;) {
      if (candidates[i] >= hi * (1 - 1e-9)) last = i;
    }
    t.values.assign(candidates.begin() + static_cast<long>(first),
                    candidates.begin() + static_cast<long>(last) + 1);
    if (t.values.size() <= 12) break;
  }
  t.lo = t.values.front(), t.hi = t.values.back();
  return t;
}

std::string format_tick(double value, double step, double axis_max_abs) {
  if (value == 0 || (step > 0 && std::fabs(value) < step * 1e-6)) return "0";
  if (step <= 0) {  // log ticks: each value's own digits
    const double a = std::fabs(value);
    if (a >= 1e4) return format_tick(value, a / 1e3, a);
    if (a >= 1e-3) return strip_zeros(printf_string("%.*f", value, 6));
    std::string s = shortest(value);
    const size_t e = s.find("e-0");
    if (e != std::string::npos) s.erase(e + 2, 1);  // "2e-05" -> "2e-5"
    return s;
  }
  if (axis_max_abs >= 1e4) {
    static const char* kSuffix[] = {"k", "M", "G", "T"};
    int k = 0;
    double unit = 1e3;
    while (k < 3 && axis_max_abs >= unit * 1e3) unit *= 1e3, ++k;
    const int digits = std::max(0, static_cast<int>(std::ceil(-std::log10(step / unit) - 1e-9)));
    return strip_zeros(printf_string("%.*f", value / unit, digits)) + kSuffix[k];
  }
  if (axis_max_abs < 1e-2) {
    const int e = static_cast<int>(std::floor(std::log10(std::fabs(value)) + 1e-9));
    const int step_e = static_cast<int>(std::floor(std::log10(step) + 1e-9));
    const double mantissa = value / std::pow(10.0, e);
    return strip_zeros(printf_string("%.*f", mantissa, std::max(0, e - step_e))) + "e" +
           std::to_string(e);
  }
  const int digits = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return printf_string("%.*f", value, digits);
}

}  // namespace ember::apps
