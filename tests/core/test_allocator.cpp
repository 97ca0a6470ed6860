// The caching allocator: buckets, reuse of freed blocks, alignment, stats.
#include <catch2/catch.hpp>

#include "core/allocator.h"
#include "core/tensor.h"

using namespace ember;

TEST_CASE("bucket sizes round up with bounded waste", "[allocator]") {
  CHECK(allocator_bucket_size(1) == 64);
  CHECK(allocator_bucket_size(64) == 64);
  CHECK(allocator_bucket_size(65) == 128);
  CHECK(allocator_bucket_size(4096) == 4096);
  for (size_t n : {4097ul, 10000ul, 1000000ul, 123456789ul}) {
    const size_t b = allocator_bucket_size(n);
    CHECK(b >= n);
    CHECK(static_cast<double>(b) <= 1.125 * static_cast<double>(n) + 64);
    CHECK(b % 64 == 0);
  }
}

TEST_CASE("a freed block is reused for the next request of its bucket", "[allocator]") {
  void* p = allocate_bytes(1 << 20);
  release_bytes(p, 1 << 20);
  const AllocatorStats before = allocator_stats();
  void* q = allocate_bytes((1 << 20) - 100);  // same bucket
  const AllocatorStats after = allocator_stats();
  CHECK(q == p);
  CHECK(after.cache_hits == before.cache_hits + 1);
  release_bytes(q, (1 << 20) - 100);
}

TEST_CASE("tensors of a repeated step reuse storage", "[allocator]") {
  for (int step = 0; step < 3; ++step) {
    Tensor a = Tensor::empty({512, 513});
    Tensor b = Tensor::empty({77});
  }
  const AllocatorStats s0 = allocator_stats();
  for (int step = 0; step < 10; ++step) {
    Tensor a = Tensor::empty({512, 513});
    Tensor b = Tensor::empty({77});
  }
  const AllocatorStats s1 = allocator_stats();
  CHECK(s1.allocations - s0.allocations == 20);
  CHECK(s1.cache_hits - s0.cache_hits == 20);
  allocator_empty_cache();
  CHECK(allocator_stats().bytes_cached == 0);
}
