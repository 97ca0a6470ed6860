// Size-bucketed caching allocator for tensor storage. Freed blocks go back to
// a per-size free list, so a training step that allocates the same activation
// sizes every step reuses warm pages instead of page-faulting through fresh
// mmaps. All blocks are 64-byte aligned. Thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember {

struct AllocatorStats {
  uint64_t allocations = 0;  // calls to allocate_bytes
  uint64_t cache_hits = 0;   // of which served from the cache
  size_t bytes_in_use = 0;   // handed out and not yet released (bucket sizes)
  size_t bytes_cached = 0;   // held in free lists
  size_t peak_bytes_in_use = 0;
};

// Size actually reserved for a request of n bytes: n rounded up to a bucket
// (multiples of 64 up to 4 KiB, then 8 buckets per power of two).
size_t allocator_bucket_size(size_t n);
void* allocate_bytes(size_t n);
void release_bytes(void* p, size_t n);
AllocatorStats allocator_stats();
// Returns every cached block to the system.
void allocator_empty_cache();

}  // namespace ember
