// autograd's profiler families (see profile_families.h), registered in report
// order: ranks 100-199 (autograd comes first in the report).
#include "autograd/profile_families.h"

namespace ember {

const prof::Family kMatmulFamily = prof::register_family("matmul", 100);
const prof::Family kAttentionFamily = prof::register_family("attention", 110);
const prof::Family kNormFamily = prof::register_family("norm", 120);
const prof::Family kElementwiseFamily = prof::register_family("elementwise", 130);
const prof::Family kLossFamily = prof::register_family("loss", 140);
const prof::Family kEmbeddingFamily = prof::register_family("embedding", 150);

}  // namespace ember
