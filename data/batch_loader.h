// BatchLoader: (B, T+1) windows of a token dataset for rank r of W, in
// docs/formats.md#batches-and-their-order. Window w covers tokens [w*T, w*T + T]. Batch
// row b of micro-step u of step s on rank r takes global slot
//   g = ((s*A + u)*W + r)*B + b
// which is window g mod n (sequential), or window perm_e(g mod n) of a
// seeded permutation for epoch e = g / n (shuffled). Both depend only on the
// step and the global batch W*B*A, so any world size reads the same data and
// the position in the stream is just the step: resume needs nothing more.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "data/epoch_shuffle.h"
#include "data/token_shard.h"

namespace ember::data {

struct BatchLoaderOptions {
  int64_t batch = 8;       // B, rows per rank
  int64_t seq_len = 256;   // T
  int64_t grad_accum = 1;  // A
  int64_t world = 1;       // W
  int64_t rank = 0;        // r
  bool sequential = false;
  uint64_t seed = 0;
};

class BatchLoader {
 public:
  BatchLoader(std::shared_ptr<const TokenDataset> data, BatchLoaderOptions options);
  // int64 tokens [B, T+1]: inputs are [:, :T], targets [:, 1:].
  Tensor batch(int64_t step, int64_t micro) const;
  // Window read by row b of (step, micro) on this rank.
  int64_t window(int64_t step, int64_t micro, int64_t b) const;
  int64_t num_windows() const { return windows_; }
  const BatchLoaderOptions& options() const { return opt_; }

 private:
  std::shared_ptr<const TokenDataset> data_;
  BatchLoaderOptions opt_;
  int64_t windows_ = 0;
  EpochShuffle shuffle_;
};

// Largest token id in the dataset (one parallel pass), for checking it
// against the model's vocabulary before training.
uint32_t max_token_id(const TokenDataset& data);

}  // namespace ember::data
