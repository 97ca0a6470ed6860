// The configurations `ember bench --preset NAME` runs: a model preset at the
// batch and sequence length it is timed at. A bench case may name a preset at
// another shape: gpt2-small-1024 is gpt2-small at the real pretraining shape
// (B 8, T 1024), not in the default list (a step takes tens of seconds).
#pragma once
#include <string>
#include <vector>

#include "apps/bench/bench_runner.h"

namespace ember::apps {

// The cases `ember bench` runs without --preset or --config.
std::vector<std::string> default_bench_cases();

// NAME's case: a bench case above, else the preset NAME at B 8, T 256
// (nn::preset_config's error for an unknown name).
BenchCase bench_preset_case(const std::string& name);

}  // namespace ember::apps
