// The KV block bookkeeping: reference counts and the free list, the prefix
// cache's hash chain (a block's key depends on every token before it), lookups
// that stop at the first miss and never return a partial block, and LRU eviction
// of cached blocks nobody holds once the free list is empty.
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "inference/kv_cache/block_manager.h"

using namespace ember::inference;

namespace {

std::vector<int64_t> iota_tokens(int64_t n, int64_t first) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Registers the full blocks of `tokens` held in `table` as a sequence would.
void register_all(BlockManager& bm, const std::vector<int32_t>& table,
                  const std::vector<int64_t>& tokens) {
  uint64_t parent = BlockManager::kRootHash;
  for (size_t b = 0; (b + 1) * 16 <= tokens.size() && b < table.size(); ++b) {
    bm.register_full(table[b], parent, tokens.data() + b * 16);
    parent = BlockManager::block_hash(parent, tokens.data() + b * 16);
  }
}

}  // namespace

TEST_CASE("blocks are reference counted and return to the free list", "[block_manager]") {
  BlockManager bm(3, true);
  const int32_t a = bm.allocate(), b = bm.allocate(), c = bm.allocate();
  CHECK(a != b);
  CHECK(b != c);
  CHECK(bm.n_used() == 3);
  CHECK(bm.n_free() == 0);
  CHECK(bm.allocate() == -1);
  bm.retain(b);
  CHECK(bm.ref_count(b) == 2);
  bm.release(b);
  CHECK(bm.n_used() == 3);
  bm.release(b);
  CHECK(bm.ref_count(b) == 0);
  CHECK(bm.n_free() == 1);
  CHECK(bm.allocate() == b);  // the freed block comes back
  std::vector<int32_t> table = {a, b, c};
  bm.release_all(table);
  CHECK(table.empty());
  CHECK(bm.n_used() == 0);
  CHECK_THROWS(bm.release(a));
}

TEST_CASE("a block's key chains its parent's: the same 16 tokens after different prefixes differ",
          "[block_manager]") {
  const std::vector<int64_t> x = iota_tokens(16, 0), y = iota_tokens(16, 100);
  const uint64_t hx = BlockManager::block_hash(BlockManager::kRootHash, x.data());
  const uint64_t hy = BlockManager::block_hash(BlockManager::kRootHash, y.data());
  CHECK(hx != hy);
  CHECK(BlockManager::block_hash(hx, y.data()) != BlockManager::block_hash(hy, y.data()));
  CHECK(BlockManager::block_hash(hx, y.data()) == BlockManager::block_hash(hx, y.data()));
  std::vector<int64_t> z = x;
  z[15] = 99;  // the last token alone changes the key
  CHECK(BlockManager::block_hash(BlockManager::kRootHash, z.data()) != hx);
}

TEST_CASE("the longest cached run of full blocks is found, retained, never a partial block",
          "[block_manager]") {
  BlockManager bm(8, true);
  const std::vector<int64_t> prompt = iota_tokens(40, 1);  // 2 full blocks + 8 tokens
  std::vector<int32_t> table = {bm.allocate(), bm.allocate(), bm.allocate()};
  register_all(bm, table, prompt);
  CHECK(bm.is_cached(table[0]));
  CHECK(bm.is_cached(table[1]));
  CHECK(!bm.is_cached(table[2]));  // partial: never shared

  // A prompt sharing 40 tokens and going on: blocks 0 and 1 (32 tokens), shared.
  std::vector<int64_t> longer = prompt;
  for (int64_t i = 0; i < 20; ++i) longer.push_back(500 + i);
  uint64_t last = 0;
  std::vector<int32_t> hit = bm.match_prefix(longer.data(), 59, &last);
  REQUIRE(hit == std::vector<int32_t>{table[0], table[1]});
  CHECK(bm.ref_count(table[0]) == 2);
  CHECK(last ==
        BlockManager::block_hash(BlockManager::block_hash(BlockManager::kRootHash, prompt.data()),
                                 prompt.data() + 16));
  // At most max_tokens: 31 tokens allow one block only.
  std::vector<int32_t> one = bm.match_prefix(longer.data(), 31, nullptr);
  CHECK(one == std::vector<int32_t>{table[0]});
  // A different first token: no block matches, even though block 1's tokens are equal.
  std::vector<int64_t> other = prompt;
  other[0] = 777;
  CHECK(bm.match_prefix(other.data(), 40, &last).empty());
  CHECK(last == BlockManager::kRootHash);
  bm.release_all(hit);
  bm.release_all(one);
  bm.release_all(table);
  CHECK(bm.n_used() == 0);
  CHECK(bm.n_cached_idle() == 2);  // cached, held by nobody, still found
  std::vector<int32_t> again = bm.match_prefix(prompt.data(), 39, nullptr);
  CHECK(again.size() == 2);
  CHECK(bm.n_used() == 2);
  CHECK(bm.n_cached_idle() == 0);
  bm.release_all(again);
}

TEST_CASE("cached blocks nobody holds are evicted least recently released first",
          "[block_manager]") {
  BlockManager bm(4, true);
  const std::vector<int64_t> p = iota_tokens(16, 0), q = iota_tokens(16, 50);
  const int32_t bp = bm.allocate(), bq = bm.allocate();
  bm.register_full(bp, BlockManager::kRootHash, p.data());
  bm.register_full(bq, BlockManager::kRootHash, q.data());
  bm.release(bq);  // q released first: the older
  bm.release(bp);
  CHECK(bm.n_free() == 4);
  const int32_t f1 = bm.allocate(), f2 = bm.allocate();  // the free list first
  CHECK(f1 != bp);
  CHECK(f2 != bq);
  CHECK(bm.n_cached_idle() == 2);
  CHECK(bm.allocate() == bq);  // then the least recently released cached block
  CHECK(!bm.is_cached(bq));
  CHECK(bm.match_prefix(q.data(), 16, nullptr).empty());  // its key is forgotten
  std::vector<int32_t> hit = bm.match_prefix(p.data(), 16, nullptr);
  CHECK(hit == std::vector<int32_t>{bp});  // p survived
  CHECK(bm.allocate() == -1);              // p is held again: nothing left
}

TEST_CASE("a key already cached leaves the second block private, the cache can be off",
          "[block_manager]") {
  BlockManager bm(3, true);
  const std::vector<int64_t> p = iota_tokens(16, 3);
  const int32_t a = bm.allocate(), b = bm.allocate();
  CHECK(bm.register_full(a, BlockManager::kRootHash, p.data()));
  CHECK(!bm.register_full(b, BlockManager::kRootHash, p.data()));
  bm.release(b);
  CHECK(bm.n_cached_idle() == 0);  // b went to the free list

  BlockManager off(2, false);
  const int32_t c = off.allocate();
  CHECK(!off.register_full(c, BlockManager::kRootHash, p.data()));
  CHECK(off.match_prefix(p.data(), 16, nullptr).empty());
}
