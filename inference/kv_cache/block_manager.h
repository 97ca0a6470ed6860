// The paged KV cache's bookkeeping: which of the n physical blocks (16 token
// positions each) are free, how many sequences hold each one (reference counts),
// and the prefix cache: a FULL block is keyed by hash(parent block's key, its 16
// token ids), so a new prompt reuses the blocks of the longest run of full blocks
// an earlier sequence computed. A cached block nobody holds stays reusable until
// the free list runs dry; then the least recently released one is evicted.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace ember::inference {

class BlockManager {
 public:
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;  // the parent of a first block

  BlockManager(int64_t n_blocks, bool prefix_cache);

  int64_t n_blocks() const { return static_cast<int64_t>(refs_.size()); }
  // Blocks some sequence holds (reference count > 0).
  int64_t n_used() const { return n_used_; }
  // Blocks allocate() can hand out: never used or freed, plus cached ones nobody holds.
  int64_t n_free() const { return n_blocks() - n_used_; }
  // Cached blocks nobody holds (a subset of n_free()).
  int64_t n_cached_idle() const { return static_cast<int64_t>(lru_.size()); }
  int32_t ref_count(int32_t block) const { return refs_[static_cast<size_t>(block)]; }
  bool is_cached(int32_t block) const;

  // A block with reference count 1: from the free list, else the least recently released
  // cached block (its key forgotten); -1 when every block is held.
  int32_t allocate();
  // One more holder of `block`.
  void retain(int32_t block);
  // One holder fewer; at zero a cached block joins the LRU list, another the free list.
  void release(int32_t block);
  void release_all(std::vector<int32_t>& table);  // every block of a table; clears it

  // The key of a full block after `parent` holding tokens[0, 16).
  static uint64_t block_hash(uint64_t parent, const int64_t* tokens);
  // Enters `block` (full: 16 tokens) in the prefix cache under its key; false when the prefix
  // cache is off or another block already holds that key (this one then stays private).
  bool register_full(int32_t block, uint64_t parent, const int64_t* tokens);
  // The cached blocks holding the longest run of full blocks that starts tokens[0, max_tokens),
  // each retained for the caller, with the key of the last one in *last_hash (kRootHash when
  // none). Tokens counted in the hit statistics by the caller.
  std::vector<int32_t> match_prefix(const int64_t* tokens, int64_t max_tokens, uint64_t* last_hash);

 private:
  struct CacheEntry {
    uint64_t hash = 0, parent = 0;
    std::vector<int64_t> tokens;       // checked on lookup: a hash collision never shares a block
    std::list<int32_t>::iterator lru;  // valid while idle (reference count 0)
    bool idle = false;
  };

  bool prefix_cache_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;                       // stack of never-cached free blocks
  std::list<int32_t> lru_;                          // idle cached blocks, least recent first
  std::unordered_map<int32_t, CacheEntry> cached_;  // block -> its key
  std::unordered_map<uint64_t, int32_t> by_hash_;   // key -> block
  int64_t n_used_ = 0;
};

}  // namespace ember::inference
