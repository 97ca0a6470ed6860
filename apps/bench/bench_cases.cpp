// The named shapes of `ember bench` (see bench_cases.h).
#include "apps/bench/bench_cases.h"

#include <array>

#include "nn/presets.h"

namespace ember::apps {

namespace {

struct NamedShape {
  const char* name;
  const char* preset;
  int64_t batch_size, seq_len;
};

constexpr std::array<NamedShape, 4> kShapes{{
    {"dense-small", "dense-small", 8, 256},
    {"moe-small", "moe-small", 8, 256},
    {"gpt2-small", "gpt2-small", 4, 64},
    {"gpt2-small-1024", "gpt2-small", 8, 1024},  // GPT-2's pretraining shape
}};

}  // namespace

std::vector<std::string> default_bench_cases() { return {"dense-small", "moe-small", "gpt2-small"}; }

BenchCase bench_preset_case(const std::string& name) {
  for (const NamedShape& s : kShapes) {
    if (name == s.name) return {name, nn::preset_config(s.preset), s.batch_size, s.seq_len};
  }
  return {name, nn::preset_config(name), 8, 256};
}

}  // namespace ember::apps
