// Model FLOPs per token with causal attention counted as a causal kernel does
// them: half of the T x T square that nn::ModelStats::flops_per_token (the
// PaLM / nanoGPT count) takes whole. The floor of `ember bench` and its causal
// MFU (mfu_causal_percent) use it; at T 1024 attention is a third of the square count.
//   causal = flops_per_token - attention_flops_per_token / 2
#pragma once
#include "nn/sizing/model_stats.h"

namespace ember::apps {

inline double causal_flops_per_token(const nn::ModelStats& st) {
  return st.flops_per_token - st.attention_flops_per_token / 2;
}

}  // namespace ember::apps
