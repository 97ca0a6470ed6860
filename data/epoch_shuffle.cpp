// EpochShuffle: Fisher-Yates over [0, n), swap k with Philox(key, k) mod
// (k + 1) for k = n-1 .. 1, key = seed * golden + epoch.
#include "data/epoch_shuffle.h"

#include <numeric>
#include <utility>

#include "core/rng.h"

namespace ember::data {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  const uint64_t key = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch);
  for (int64_t k = n - 1; k > 0; --k) {
    const auto r = philox4x32(key, static_cast<uint64_t>(k), 0x5348554646ull);  // "SHUFF"
    const uint64_t bits = (static_cast<uint64_t>(r[0]) << 32) | r[1];
    std::swap(perm[k], perm[bits % static_cast<uint64_t>(k + 1)]);
  }
  return perm;
}

int64_t EpochShuffle::operator()(int64_t slot) const {
  const int64_t epoch = slot / n_, i = slot % n_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch != epoch_) {
    perm_ = epoch_permutation(n_, seed_, epoch);
    epoch_ = epoch;
  }
  return perm_[static_cast<size_t>(i)];
}

}  // namespace ember::data
