// EncodeCache: remembers the ids of pieces already encoded, one cache per
// thread (it is not shared, so no locks). Bounded: when full it starts over.
// A cache belongs to one tokenizer; handing it to another clears it.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "data/tokenizer/hash_table.h"

namespace ember::data {

class EncodeCache {
 public:
  explicit EncodeCache(size_t max_entries = size_t{1} << 16) : max_entries_(max_entries) {}

  // Clears the cache when it was filled by another tokenizer.
  void bind(uint64_t owner) {
    if (owner != owner_) {
      clear();
      owner_ = owner;
    }
  }
  // Appends the cached ids of piece to out; false when absent.
  bool append(std::string_view piece, uint64_t h, std::vector<uint32_t>& out) const {
    const Span* s = table_.find(piece, h);
    if (!s) return false;
    out.insert(out.end(), ids_.begin() + s->off, ids_.begin() + s->off + s->len);
    return true;
  }
  void insert(std::string_view piece, uint64_t h, const uint32_t* ids, size_t n) {
    if (table_.size() >= max_entries_) clear();
    table_.insert(piece, h, Span{static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)});
    ids_.insert(ids_.end(), ids, ids + n);
  }
  void clear() {
    table_.clear();
    ids_.clear();
  }
  size_t size() const { return table_.size(); }

 private:
  struct Span {
    uint32_t off;
    uint32_t len;
  };
  StringTable<Span> table_;
  std::vector<uint32_t> ids_;
  size_t max_entries_;
  uint64_t owner_ = 0;
};

}  // namespace ember::data
