// BatchLoader: window arithmetic and the per-epoch seeded permutation
// (Fisher-Yates driven by Philox counters (seed, epoch, i)).
#include "data/batch_loader.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace ember::data {

BatchLoader::BatchLoader(std::shared_ptr<const TokenDataset> data, BatchLoaderOptions options)
    : data_(std::move(data)), opt_(options) {
  EMBER_CHECK(opt_.batch > 0 && opt_.seq_len > 0 && opt_.grad_accum > 0 && opt_.world > 0 &&
                  opt_.rank >= 0 && opt_.rank < opt_.world,
              "BatchLoader: invalid batch ", opt_.batch, ", seq_len ", opt_.seq_len, ", grad_accum ",
              opt_.grad_accum, ", world ", opt_.world, ", rank ", opt_.rank);
  const int64_t tokens = static_cast<int64_t>(data_->size());
  windows_ = tokens > 0 ? (tokens - 1) / opt_.seq_len : 0;
  EMBER_CHECK(windows_ > 0, "the dataset holds ", tokens, " tokens: too few for one window of ",
              opt_.seq_len + 1, " tokens (lower --seq-len or add data)");
}

int64_t BatchLoader::shuffled(int64_t slot) const {
  const int64_t epoch = slot / windows_, i = slot % windows_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch != perm_epoch_) {
    perm_.resize(static_cast<size_t>(windows_));
    std::iota(perm_.begin(), perm_.end(), int64_t{0});
    const uint64_t key = opt_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch);
    for (int64_t k = windows_ - 1; k > 0; --k) {
      const auto r = philox4x32(key, static_cast<uint64_t>(k), 0x5348554646ull);  // "SHUFF"
      const uint64_t bits = (static_cast<uint64_t>(r[0]) << 32) | r[1];
      std::swap(perm_[k], perm_[bits % static_cast<uint64_t>(k + 1)]);
    }
    perm_epoch_ = epoch;
  }
  return perm_[i];
}

int64_t BatchLoader::window(int64_t step, int64_t micro, int64_t b) const {
  const int64_t slot = ((step * opt_.grad_accum + micro) * opt_.world + opt_.rank) * opt_.batch + b;
  return opt_.sequential ? slot % windows_ : shuffled(slot);
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
