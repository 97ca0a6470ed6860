// Caching allocator: a free list per bucket size, behind one mutex. The lock
// is taken once per tensor allocation, which is rare next to the math.
#include "core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace ember {
namespace {

constexpr size_t kAlign = 64;
// Cached bytes beyond this are returned to the system on release.
constexpr size_t kMaxCachedBytes = size_t{8} << 30;

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_lists;
  AllocatorStats stats;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive statics
  return *c;
}

}  // namespace

size_t allocator_bucket_size(size_t n) {
  if (n == 0) n = 1;
  if (n <= 4096) return (n + kAlign - 1) / kAlign * kAlign;
  // 8 buckets per power of two: waste at most 12.5%.
  const size_t top = std::bit_floor(n);
  const size_t step = top / 8;
  return (n + step - 1) / step * step;
}

void* allocate_bytes(size_t n) {
  const size_t size = allocator_bucket_size(n);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.allocations++;
    auto it = c.free_lists.find(size);
    if (it != c.free_lists.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cache_hits++;
      c.stats.bytes_cached -= size;
      c.stats.bytes_in_use += size;
      c.stats.peak_bytes_in_use = std::max(c.stats.peak_bytes_in_use, c.stats.bytes_in_use);
      return p;
    }
  }
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) {
    allocator_empty_cache();
    p = std::aligned_alloc(kAlign, size);
    if (p == nullptr) throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.bytes_in_use += size;
  c.stats.peak_bytes_in_use = std::max(c.stats.peak_bytes_in_use, c.stats.bytes_in_use);
  return p;
}

void release_bytes(void* p, size_t n) {
  if (p == nullptr) return;
  const size_t size = allocator_bucket_size(n);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.bytes_in_use -= size;
  if (c.stats.bytes_cached + size > kMaxCachedBytes) {
    std::free(p);
    return;
  }
  c.free_lists[size].push_back(p);
  c.stats.bytes_cached += size;
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void allocator_empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, list] : c.free_lists) {
    for (void* p : list) std::free(p);
    list.clear();
  }
  c.stats.bytes_cached = 0;
}

}  // namespace ember
