// The --weights option of the commands that run the inference model (serve, generate, chat,
// evaluate, bench-serve): the type its Linear weights are converted to once at load
// (core/kernels/packed_weights.h; docs/performance.md#weight-types).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace ember::apps {

void add_weights_option(CLI::App* sub, std::string& weights);

}  // namespace ember::apps
