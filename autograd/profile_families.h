// The profiler's op families owned by autograd (core/profiler.h): each
// differentiable op opens one, and a recorded backward node is charged to the
// family its forward ran under.
#pragma once
#include "core/profiler.h"

namespace ember {

extern const prof::Family kMatmulFamily;       // the matmul ops (matmul, grouped_linear)
extern const prof::Family kAttentionFamily;    // the fused attention op and RoPE
extern const prof::Family kNormFamily;         // RMSNorm, LayerNorm
extern const prof::Family kElementwiseFamily;  // unary, binary, reductions, softmax, dropout, where,
                                               // GLU; gradient accumulation in the engine
extern const prof::Family kLossFamily;         // fused cross-entropy with z-loss
extern const prof::Family kEmbeddingFamily;    // token and position lookups

}  // namespace ember
