// Mean and numpy-style interpolated percentiles (percentiles.h states the formula).
#include "apps/serve_bench/percentiles.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace ember::apps {

namespace {

double sorted_percentile(const std::vector<double>& sorted, double q) {
  const double h = static_cast<double>(sorted.size() - 1) * q / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

}  // namespace

std::optional<double> percentile(std::vector<double> values, double q) {
  EMBER_CHECK(q >= 0 && q <= 100, "percentile: q must be in [0, 100], got ", q);
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  return sorted_percentile(values, q);
}

SampleSummary summarize(const std::vector<double>& values) {
  SampleSummary s;
  s.count = values.size();
  if (values.empty()) return s;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
  s.p50 = sorted_percentile(sorted, 50);
  s.p90 = sorted_percentile(sorted, 90);
  s.p99 = sorted_percentile(sorted, 99);
  return s;
}

}  // namespace ember::apps
