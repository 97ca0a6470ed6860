// Free list, reference counts and the hash-chained prefix cache of KV blocks.
// Key of a full block: h = mix(parent, t_0, ..., t_15) with splitmix64 steps,
// so equal keys mean (up to 2^-64) equal token prefixes; tokens are also compared.
#include "inference/kv_cache/block_manager.h"

#include <algorithm>

#include "core/error.h"
#include "inference/model_runner/paged_forward.h"

namespace ember::inference {
namespace {

uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace

BlockManager::BlockManager(int64_t n_blocks, bool prefix_cache) : prefix_cache_(prefix_cache) {
  EMBER_CHECK(n_blocks > 0 && n_blocks < (int64_t{1} << 31), "block manager: ", n_blocks,
              " blocks; need at least one");
  refs_.assign(static_cast<size_t>(n_blocks), 0);
  free_.resize(static_cast<size_t>(n_blocks));
  for (int64_t i = 0; i < n_blocks; ++i)
    free_[static_cast<size_t>(i)] = static_cast<int32_t>(n_blocks - 1 - i);
}

bool BlockManager::is_cached(int32_t block) const {
  return cached_.count(block) > 0;
}

int32_t BlockManager::allocate() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    const auto it = cached_.find(b);
    by_hash_.erase(it->second.hash);
    cached_.erase(it);
  } else {
    return -1;
  }
  refs_[static_cast<size_t>(b)] = 1;
  ++n_used_;
  return b;
}

void BlockManager::retain(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  if (r == 0) {  // only a cached block can be picked up again at zero
    auto it = cached_.find(block);
    EMBER_CHECK(it != cached_.end() && it->second.idle, "block manager: retain of free block ",
                block);
    lru_.erase(it->second.lru);
    it->second.idle = false;
    ++n_used_;
  }
  ++r;
}

void BlockManager::release(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  EMBER_CHECK(r > 0, "block manager: release of free block ", block);
  if (--r > 0) return;
  --n_used_;
  auto it = cached_.find(block);
  if (it == cached_.end()) {
    free_.push_back(block);
  } else {
    it->second.lru = lru_.insert(lru_.end(), block);
    it->second.idle = true;
  }
}

void BlockManager::release_all(std::vector<int32_t>& table) {
  for (const int32_t b : table) release(b);
  table.clear();
}

uint64_t BlockManager::block_hash(uint64_t parent, const int64_t* tokens) {
  uint64_t h = mix(parent, 0x5bd1e995u);
  for (int64_t i = 0; i < kKVBlockSize; ++i) h = mix(h, static_cast<uint64_t>(tokens[i]));
  return h;
}

bool BlockManager::register_full(int32_t block, uint64_t parent, const int64_t* tokens) {
  if (!prefix_cache_ || cached_.count(block) > 0) return false;
  const uint64_t h = block_hash(parent, tokens);
  if (by_hash_.count(h) > 0) return false;
  CacheEntry e;
  e.hash = h;
  e.parent = parent;
  e.tokens.assign(tokens, tokens + kKVBlockSize);
  cached_.emplace(block, std::move(e));
  by_hash_.emplace(h, block);
  return true;
}

std::vector<int32_t> BlockManager::match_prefix(const int64_t* tokens, int64_t max_tokens,
                                                uint64_t* last_hash) {
  std::vector<int32_t> blocks;
  uint64_t parent = kRootHash;
  for (int64_t start = 0; prefix_cache_ && start + kKVBlockSize <= max_tokens;
       start += kKVBlockSize) {
    const uint64_t h = block_hash(parent, tokens + start);
    const auto hit = by_hash_.find(h);
    if (hit == by_hash_.end()) break;
    const CacheEntry& e = cached_.at(hit->second);
    if (e.parent != parent || !std::equal(e.tokens.begin(), e.tokens.end(), tokens + start)) break;
    retain(hit->second);
    blocks.push_back(hit->second);
    parent = h;
  }
  if (last_hash) *last_hash = parent;
  return blocks;
}

}  // namespace ember::inference
