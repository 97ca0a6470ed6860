// The held-out split of --val-fraction (docs/formats.md#preference-data-jsonl): a
// seeded choice of floor(n x fraction) of n items, the first ones of
// epoch_permutation(n, seed, -1) (an epoch the training order never reads), so
// the same for every world size.
#pragma once
#include <cstdint>
#include <vector>

namespace ember::data {

// held[i] is true when item i is held out; an Error unless fraction is in [0, 1).
std::vector<bool> held_out_items(int64_t n, double fraction, uint64_t seed);

}  // namespace ember::data
