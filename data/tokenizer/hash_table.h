// Open-addressing hash tables for the tokenizer's hot paths: StringTable maps
// byte strings (kept in one arena) to values, PairTable maps a pair of token
// ids to a value. Linear probing, load factor at most 1/2, no erase.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ember::data {

inline uint64_t hash_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0x2545F4914F6CDD1DULL);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = (h ^ v) * 0x100000001B3ULL;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    h = (h ^ v) * 0x100000001B3ULL;
  }
  return hash_mix(h);
}

template <class V>
class StringTable {
 public:
  explicit StringTable(size_t capacity = 1024) { reset(capacity); }

  const V* find(std::string_view key, uint64_t h) const {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.len == kEmpty) return nullptr;
      if (s.hash == h && s.len == key.size() &&
          std::memcmp(arena_.data() + s.off, key.data(), key.size()) == 0)
        return &s.value;
    }
  }
  V* find(std::string_view key, uint64_t h) {
    return const_cast<V*>(static_cast<const StringTable*>(this)->find(key, h));
  }
  // The value for key, inserted as init when absent; second is true if inserted.
  std::pair<V*, bool> insert(std::string_view key, uint64_t h, const V& init) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.len == kEmpty) {
        EMBER_CHECK(arena_.size() + key.size() < kEmpty, "StringTable: more than 4 GiB of keys");
        s = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), init};
        arena_.append(key);
        ++size_;
        return {&s.value, true};
      }
      if (s.hash == h && s.len == key.size() &&
          std::memcmp(arena_.data() + s.off, key.data(), key.size()) == 0)
        return {&s.value, false};
    }
  }
  size_t size() const { return size_; }
  size_t key_bytes() const { return arena_.size(); }
  void clear() { reset(1024); }
  // f(std::string_view key, const V& value) for every entry, in table order.
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.len != kEmpty) f(std::string_view(arena_.data() + s.off, s.len), s.value);
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash;
    uint32_t off;
    uint32_t len;
    V value;
  };
  void reset(size_t capacity) {
    size_t cap = 16;
    while (cap < capacity) cap *= 2;
    slots_.assign(cap, Slot{0, 0, kEmpty, V{}});
    mask_ = cap - 1;
    size_ = 0;
    arena_.clear();
  }
  void grow() {
    std::vector<Slot> old(2 * slots_.size(), Slot{0, 0, kEmpty, V{}});
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.len == kEmpty) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].len != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

inline uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

template <class V>
class PairTable {
 public:
  explicit PairTable(size_t capacity = 1024) {
    size_t cap = 16;
    while (cap < 2 * capacity) cap *= 2;
    slots_.assign(cap, Slot{kEmpty, V{}});
    mask_ = cap - 1;
  }
  const V* find(uint64_t key) const {
    for (size_t i = hash_mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  V* find(uint64_t key) { return const_cast<V*>(static_cast<const PairTable*>(this)->find(key)); }
  std::pair<V*, bool> insert(uint64_t key, const V& init) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (size_t i = hash_mix(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return {&s.value, false};
      if (s.key == kEmpty) {
        s = Slot{key, init};
        ++size_;
        return {&s.value, true};
      }
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  struct Slot {
    uint64_t key;
    V value;
  };
  void grow() {
    std::vector<Slot> old(2 * slots_.size(), Slot{kEmpty, V{}});
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      size_t i = hash_mix(s.key) & mask_;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace ember::data
