// autograd/gradient_buckets: the bucket cut of dist::Reducer and the memory
// plan against cuts worked out by hand (the arithmetic is in the comments):
// by bytes with a smaller first bucket, a parameter over the cap alone, by
// unit whatever the sizes, and a transformer's parameter list.
#include <catch2/catch.hpp>

#include "autograd/gradient_buckets.h"

using namespace ember;

namespace {

using Buckets = std::vector<std::vector<size_t>>;

}  // namespace

TEST_CASE("gradient_buckets: cuts by bytes from the last parameter, or by unit", "[gradient_buckets]") {
  SECTION("by bytes: the first cap applies to the first bucket only") {
    // Elements 5 each, 4 bytes: 20 bytes a parameter. First cap 40: [3, 2] (40 bytes, not
    // over); parameter 1 would make 60 > 40, so a new bucket; with cap 80 it takes 1 and 0.
    CHECK(gradient_buckets({5, 5, 5, 5}, 4, 40, 80) == Buckets{{3, 2}, {1, 0}});
    // First cap 20: [3] alone; then 2, 1, 0 make 60 <= 80.
    CHECK(gradient_buckets({5, 5, 5, 5}, 4, 20, 80) == Buckets{{3}, {2, 1, 0}});
    // 8-byte elements, 40 bytes a parameter: [3] over the first cap 20 alone; then 2 and 1
    // make 80 (not over 80) and 0 would make 120.
    CHECK(gradient_buckets({5, 5, 5, 5}, 8, 20, 80) == Buckets{{3}, {2, 1}, {0}});
  }
  SECTION("a parameter larger than the cap sits alone") {
    // 40 elements = 160 bytes > first cap 100: alone. 30 (120 > 100 with 40): a new bucket,
    // under cap 200 it takes 20 (200, not over), then 10 would make 240: a third bucket.
    CHECK(gradient_buckets({10, 20, 30, 40}, 4, 100, 200) == Buckets{{3}, {2, 1}, {0}});
    CHECK(gradient_buckets({10, 20, 30, 40}, 4, 1 << 20, 1 << 20) == Buckets{{3, 2, 1, 0}});
    CHECK(gradient_buckets({1000}, 4, 4, 4) == Buckets{{0}});
    CHECK(gradient_buckets({}, 4, 4, 4).empty());
  }
  SECTION("by unit: cut exactly where the unit changes, whatever the sizes") {
    // units: token table -2, block 0, block 0, block 1, block 1, root -1 (final norm).
    const std::vector<int64_t> numels = {1, 100, 100, 1, 100, 1}, units = {-2, 0, 0, 1, 1, -1};
    const Buckets by_unit{{5}, {4, 3}, {2, 1}, {0}};
    CHECK(gradient_buckets(numels, 4, 4, 4, units) == by_unit);
    CHECK(gradient_buckets(numels, 4, 1 << 20, 1 << 20, units) == by_unit);
    // Without units the same sizes cut by bytes (caps 404 bytes, 101 elements): [5, 4] = 101;
    // 3 would make 102: [3, 2] = 101; 1 would make 201: [1, 0] = 101.
    CHECK(gradient_buckets(numels, 4, 404, 404) == Buckets{{5, 4}, {3, 2}, {1, 0}});
    CHECK_THROWS_WITH(gradient_buckets(numels, 4, 4, 4, {0, 1}),
                      Catch::Contains("2 units for 6 parameters"));
  }
  SECTION("a transformer's parameters, caps 50000 and 100000 bytes") {
    // vocab 256, d 64, 2 layers, 4 heads, SwiGLU 128, tied: embedding 16384; per block norm 64,
    // q, k, v, o 4096 each, norm 64, gate, up, down 8192 each; final norm 64.
    std::vector<int64_t> numels = {16384};
    for (int block = 0; block < 2; ++block) {
      for (int64_t n : {64, 4096, 4096, 4096, 4096, 64, 8192, 8192, 8192}) numels.push_back(n);
    }
    numels.push_back(64);
    // Caps 12500 then 25000 floats. From the end: final norm + down 8256 (up would make 16448);
    // up, gate, norm, o, v 24640 (k would make 28736); k, q, norm, down, up 24640 (gate:
    // 32832); gate, norm, o, v, k, q, norm 24704 (the embedding: 41088); the embedding 16384.
    const Buckets expect{{19, 18}, {17, 16, 15, 14, 13}, {12, 11, 10, 9, 8}, {7, 6, 5, 4, 3, 2, 1}, {0}};
    CHECK(gradient_buckets(numels, 4, 50000, 100000) == expect);
  }
}
