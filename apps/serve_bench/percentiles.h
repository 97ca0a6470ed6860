// Summary statistics of a benchmark's samples: the mean and percentiles by
// linear interpolation between the closest ranks (numpy.percentile's default):
// for sorted x[0..n-1] and q in [0, 100], h = (n - 1) q / 100 and
// P(q) = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]).
#pragma once
#include <optional>
#include <vector>

namespace ember::apps {

// P(q) of the values (any order); nullopt when there are none.
std::optional<double> percentile(std::vector<double> values, double q);

struct SampleSummary {
  size_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;  // meaningful when count > 0
};

SampleSummary summarize(const std::vector<double>& values);

}  // namespace ember::apps
