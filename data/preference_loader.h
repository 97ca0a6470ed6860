// Preference pairs in batches (docs/formats.md#preference-data-jsonl): section "Rows and order"
// of chat data with a pair as the unit. Pair b of micro-step u of step s on rank r reads global
// slot g = ((s*A + u)*W + r)*B + b, which is pair g mod n (sequential) or EpochShuffle's
// perm_e(g mod n), e = g / n (default): the same pairs for every world size. A batch holds both
// sides of its B pairs as 2B rows (the chosen sides, then the rejected ones in the same order),
// padded after their ids, with the scored mask over the targets.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/batch_loader.h"
#include "data/epoch_shuffle.h"
#include "data/preference_pairs.h"

namespace ember::data {

struct PairBatch {
  Tensor tokens;  // int64 [2B, T+1]: rows 0..B-1 chosen, B..2B-1 rejected; inputs [:, :T], targets [:, 1:]
  Tensor scored;  // float32 [2B, T]: 1 where target [:, t] (the id at t + 1) is a scored token
  std::vector<int64_t> pairs;  // the pair (index into the pairs) of each of the B pairs
};

// The sides of pairs[index[0]], pairs[index[1]], ... as one batch of 2 x index.size() rows of
// T+1 ids (each side holds at most T+1 ids: make_preference_pairs cut them).
PairBatch pair_batch(const std::vector<PreferencePair>& pairs, const std::vector<int64_t>& index,
                     int64_t seq_len);

// The same pairs as pair_batch(pairs, index, seq_len), in two batches: the first ceil(n / 2) of
// the n pairs, then the rest (one batch when n is 1). Training and scoring run a step's pairs
// through the model half by half, so that at most n + 1 rows are live at once, as in a
// fine-tune step of n rows.
std::vector<PairBatch> pair_halves(const std::vector<PreferencePair>& pairs,
                                   const std::vector<int64_t>& index, int64_t seq_len);

class PairLoader {
 public:
  // options.seq_len is T, every side at most T+1 ids; an Error when there is no pair.
  PairLoader(std::shared_ptr<const std::vector<PreferencePair>> pairs, BatchLoaderOptions options);
  PairBatch batch(int64_t step, int64_t micro) const;
  // The pairs that batch(step, micro) holds, in its order.
  std::vector<int64_t> batch_pairs(int64_t step, int64_t micro) const;
  // The pair read by pair b of (step, micro) on this rank.
  int64_t pair(int64_t step, int64_t micro, int64_t b) const;
  int64_t num_pairs() const { return shuffle_.size(); }
  const BatchLoaderOptions& options() const { return opt_; }

 private:
  std::shared_ptr<const std::vector<PreferencePair>> pairs_;
  BatchLoaderOptions opt_;
  EpochShuffle shuffle_;
};

}  // namespace ember::data
