// The held-out split: the first floor(n x fraction) items of the seeded
// permutation of epoch -1, marked in item order.
#include "data/held_out.h"

#include "core/error.h"
#include "data/epoch_shuffle.h"

namespace ember::data {

std::vector<bool> held_out_items(int64_t n, double fraction, uint64_t seed) {
  EMBER_CHECK(n >= 0 && fraction >= 0.0 && fraction < 1.0,
              "held-out split: fraction must be in [0, 1), got ", fraction, " of ", n, " items");
  std::vector<bool> held(static_cast<size_t>(n), false);
  const auto count = static_cast<int64_t>(static_cast<double>(n) * fraction);
  const std::vector<int64_t> perm = epoch_permutation(n, seed, -1);
  for (int64_t i = 0; i < count; ++i)
    held[static_cast<size_t>(perm[static_cast<size_t>(i)])] = true;
  return held;
}

}  // namespace ember::data
