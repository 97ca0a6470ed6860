// EpochShuffle: the seeded order of n items, a fresh permutation per epoch.
// Slot g reads item perm_e(g mod n) of epoch e = g / n; perm_e is a
// Fisher-Yates shuffle driven by Philox counters (seed, epoch, k), so it
// depends only on (seed, n, epoch): every world size and thread count agrees.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

namespace ember::data {

// The permutation of [0, n) for one epoch.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

class EpochShuffle {
 public:
  EpochShuffle(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  // Item read by global slot g >= 0 (the last epoch's permutation is cached).
  int64_t operator()(int64_t slot) const;
  int64_t size() const { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
  mutable std::mutex mutex_;
  mutable int64_t epoch_ = -1;
  mutable std::vector<int64_t> perm_;
};

}  // namespace ember::data
