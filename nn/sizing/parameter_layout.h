// The parameters a config builds, from the config alone: each one's name, shape, element
// count and block in Transformer::parameters() order (a test checks it against
// a built model), so a memory plan (nn/sizing/memory_plan.h) can cut the gradient buckets
// (autograd/gradient_buckets.h) and size per-bucket buffers, and the parallel plan
// (nn/parallel_plan.h) split them, without building the model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/config.h"

namespace ember::nn {

inline constexpr int64_t kTokenTable = -2;

struct ParameterEntry {
  int64_t numel = 0;
  // The TransformerBlock it belongs to; -1: position table, final norm, lm_head; kTokenTable:
  // the token embedding table (ZeRO-3 gathers and frees it as a unit of its own).
  int64_t block = -1;
  std::string name;            // as named_parameters() names it (docs/model.md#parameter-names)
  std::vector<int64_t> shape;  // Linear weights [out, in]
};

// Every parameter of Transformer(cfg), in registration order (LoRA adapters not included).
std::vector<ParameterEntry> parameter_layout(const ModelConfig& cfg);

}  // namespace ember::nn
