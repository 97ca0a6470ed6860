// BatchLoader: window arithmetic; the per-epoch seeded permutation is
// EpochShuffle's (data/epoch_shuffle.h).
#include "data/batch_loader.h"

#include <algorithm>

#include "core/error.h"

namespace ember::data {
namespace {

// Whole windows of T + 1 tokens (consecutive windows share one token).
int64_t window_count(const TokenDataset& data, int64_t seq_len) {
  const int64_t tokens = static_cast<int64_t>(data.size());
  return tokens > 0 && seq_len > 0 ? (tokens - 1) / seq_len : 0;
}

}  // namespace

BatchLoader::BatchLoader(std::shared_ptr<const TokenDataset> data, BatchLoaderOptions options)
    : data_(std::move(data)),
      opt_(options),
      windows_(window_count(*data_, opt_.seq_len)),
      shuffle_(windows_, opt_.seed) {
  EMBER_CHECK(opt_.batch > 0 && opt_.seq_len > 0 && opt_.grad_accum > 0 && opt_.world > 0 &&
                  opt_.rank >= 0 && opt_.rank < opt_.world,
              "BatchLoader: invalid batch ", opt_.batch, ", seq_len ", opt_.seq_len, ", grad_accum ",
              opt_.grad_accum, ", world ", opt_.world, ", rank ", opt_.rank);
  EMBER_CHECK(windows_ > 0, "the dataset holds ", data_->size(), " tokens: too few for one window of ",
              opt_.seq_len + 1, " tokens (lower --seq-len or add data)");
}

int64_t BatchLoader::window(int64_t step, int64_t micro, int64_t b) const {
  const int64_t slot = ((step * opt_.grad_accum + micro) * opt_.world + opt_.rank) * opt_.batch + b;
  return opt_.sequential ? slot % windows_ : shuffle_(slot);
}

Tensor BatchLoader::batch(int64_t step, int64_t micro) const {
  const int64_t T = opt_.seq_len;
  Tensor out = Tensor::empty({opt_.batch, T + 1}, DType::Int64);
  int64_t* p = out.data<int64_t>();
  for (int64_t b = 0; b < opt_.batch; ++b) {
    const uint64_t start = static_cast<uint64_t>(window(step, micro, b) * T);
    data_->read(start, static_cast<size_t>(T + 1), p + b * (T + 1));
  }
  return out;
}

uint32_t max_token_id(const TokenDataset& data) {
  uint32_t best = 0;
  for (size_t s = 0; s < data.num_shards(); ++s) {
    const TokenShard& shard = data.shard(s);
    const int64_t n = static_cast<int64_t>(shard.size());
    uint32_t m = 0;
#pragma omp parallel for reduction(max : m) if (n > 1000000)
    for (int64_t i = 0; i < n; ++i) m = std::max(m, shard[static_cast<uint64_t>(i)]);
    best = std::max(best, m);
  }
  return best;
}

}  // namespace ember::data
