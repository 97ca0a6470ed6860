// The gradient buckets of data-parallel training as a pure function of the
// parameters' sizes: dist::Reducer lays its flat gradient buffer out by it,
// and the memory plan (nn/sizing/memory_plan.h) sizes per-bucket buffers by it
// without building a model. Parameters are taken in reverse registration
// order, about the order backward finishes their gradients.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember {

// The parameters (indices into numels, which is in registration order) of each bucket, in the
// order the buckets fill, each bucket's from the last index down. Walking the parameters from
// the last, a new bucket starts before a parameter that would take the current one past its
// cap in bytes (numel x element_bytes): first_bucket_bytes for the first bucket, bucket_bytes
// for the others; a parameter larger than the cap sits alone. With units (one per parameter,
// e.g. its transformer block: ZeRO-3), a new bucket starts exactly where the unit changes,
// whatever the sizes.
std::vector<std::vector<size_t>> gradient_buckets(const std::vector<int64_t>& numels,
                                                  int64_t element_bytes,
                                                  int64_t first_bucket_bytes, int64_t bucket_bytes,
                                                  const std::vector<int64_t>& units = {});

}  // namespace ember
