// Batches of preference pairs: the rows of pair_batch (chosen sides, then rejected ones,
// padded with 0, the scored mask moved onto the targets) against rows written by hand, the
// pairs a PairLoader step reads (slot ((s A + u) W + r) B + b), and pair_halves: the same
// rows as the whole batch, in two batches of ceil(n / 2) and floor(n / 2) pairs.
#include <catch2/catch.hpp>

#include "data/preference_loader.h"

using namespace ember;
using namespace ember::data;

namespace {

// Pair k: chosen ids 10k+1 .. 10k+1+k (k + 1 ids after a prompt id 100), rejected 3 ids;
// the answer's ids are scored, the prompt's are not.
std::vector<PreferencePair> numbered_pairs(int n) {
  std::vector<PreferencePair> pairs(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    PreferencePair& p = pairs[static_cast<size_t>(k)];
    p.chosen.ids = {100}, p.chosen.scored = {0};
    for (int i = 0; i <= k; ++i) p.chosen.ids.push_back(static_cast<uint32_t>(10 * k + 1 + i));
    p.chosen.scored.resize(p.chosen.ids.size(), 1);
    p.rejected.ids = {100, static_cast<uint32_t>(200 + k), static_cast<uint32_t>(300 + k)};
    p.rejected.scored = {0, 1, 1};
    p.line = k + 1;
  }
  return pairs;
}

// Row `row` of an int64 [R, C] tensor.
std::vector<int64_t> row_of(const Tensor& t, int64_t row) {
  const int64_t C = t.shape()[1];
  const int64_t* d = t.data<int64_t>() + row * C;
  return {d, d + C};
}

std::vector<float> mask_row(const Tensor& t, int64_t row) {
  const int64_t C = t.shape()[1];
  const float* d = t.data<float>() + row * C;
  return {d, d + C};
}

}  // namespace

TEST_CASE("pair batch: chosen rows, then rejected rows, padded, scored on the targets") {
  const auto pairs = numbered_pairs(4);
  const PairBatch b = pair_batch(pairs, {2, 0}, 4);  // T = 4: rows of 5 ids
  REQUIRE(b.tokens.shape() == std::vector<int64_t>{4, 5});
  REQUIRE(b.scored.shape() == std::vector<int64_t>{4, 4});
  CHECK(b.pairs == std::vector<int64_t>{2, 0});
  CHECK(row_of(b.tokens, 0) == std::vector<int64_t>{100, 21, 22, 23, 0});
  CHECK(row_of(b.tokens, 1) == std::vector<int64_t>{100, 1, 0, 0, 0});
  CHECK(row_of(b.tokens, 2) == std::vector<int64_t>{100, 202, 302, 0, 0});
  CHECK(row_of(b.tokens, 3) == std::vector<int64_t>{100, 200, 300, 0, 0});
  // target t is the id at t + 1: scored where that id is an answer's
  CHECK(mask_row(b.scored, 0) == std::vector<float>{1, 1, 1, 0});
  CHECK(mask_row(b.scored, 1) == std::vector<float>{1, 0, 0, 0});
  CHECK(mask_row(b.scored, 2) == std::vector<float>{1, 1, 0, 0});
  CHECK(mask_row(b.scored, 3) == std::vector<float>{1, 1, 0, 0});
}

TEST_CASE("pair halves: ceil(n / 2) then floor(n / 2) pairs, the whole batch's rows") {
  const auto pairs = numbered_pairs(6);
  for (const std::vector<int64_t>& index :
       {std::vector<int64_t>{0, 1, 2, 3, 4}, {5, 3, 1, 0}, {4, 2}, {3}}) {
    const size_t n = index.size(), first = (n + 1) / 2;
    const PairBatch whole = pair_batch(pairs, index, 6);
    const std::vector<PairBatch> halves = pair_halves(pairs, index, 6);
    REQUIRE(halves.size() == (n == 1 ? 1u : 2u));
    CHECK(halves[0].pairs == std::vector<int64_t>(index.begin(), index.begin() + first));
    if (n > 1) CHECK(halves[1].pairs == std::vector<int64_t>(index.begin() + first, index.end()));
    size_t seen = 0;
    for (const PairBatch& h : halves) {
      const int64_t k = static_cast<int64_t>(h.pairs.size());
      REQUIRE(h.tokens.shape() == std::vector<int64_t>{2 * k, 7});
      CHECK(k <= static_cast<int64_t>(first));
      for (int64_t b = 0; b < k; ++b) {  // pair b of the half is pair seen + b of the whole
        const int64_t w = static_cast<int64_t>(seen) + b, B = static_cast<int64_t>(n);
        CHECK(row_of(h.tokens, b) == row_of(whole.tokens, w));
        CHECK(row_of(h.tokens, k + b) == row_of(whole.tokens, B + w));
        CHECK(mask_row(h.scored, b) == mask_row(whole.scored, w));
        CHECK(mask_row(h.scored, k + b) == mask_row(whole.scored, B + w));
      }
      seen += h.pairs.size();
    }
    CHECK(seen == n);
  }
}

TEST_CASE("pair loader: step s, micro u on rank r reads slots ((s A + u) W + r) B + b") {
  auto pairs = std::make_shared<const std::vector<PreferencePair>>(numbered_pairs(6));
  BatchLoaderOptions o;
  o.batch = 2, o.seq_len = 6, o.grad_accum = 2, o.world = 2, o.rank = 1, o.sequential = true;
  const PairLoader loader(pairs, o);
  // s = 1, u = 0: slots (2 * 2 + 1) * 2 = 10, 11 -> pairs 4, 5; u = 1: 14, 15 -> 2, 3
  CHECK(loader.batch_pairs(1, 0) == std::vector<int64_t>{4, 5});
  CHECK(loader.batch_pairs(1, 1) == std::vector<int64_t>{2, 3});
  const PairBatch b = loader.batch(1, 1);
  CHECK(b.pairs == std::vector<int64_t>{2, 3});
  CHECK(row_of(b.tokens, 0) == row_of(pair_batch(*pairs, {2, 3}, 6).tokens, 0));
}
