// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011). Value i of
// a draw depends only on (seed, offset + i), never on thread count or order,
// so a resumed run draws exactly what an unbroken one would.
#pragma once
#include <array>
#include <cstdint>

namespace ember {

// One Philox4x32-10 block: four 32-bit words for counter `ctr` under `key`.
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi = 0);

// Uniform in [0, 1) from 24 (float) or 53 (double) random bits.
inline float uniform_float(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }
inline double uniform_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>((static_cast<uint64_t>(hi) << 21) ^ (lo >> 11)) * 0x1p-53;
}

// A seed plus a running offset: each draw of n numbers uses counters
// [offset, offset + n) and then advances offset by n. Its two fields are the
// whole state a checkpoint needs.
struct Generator {
  uint64_t seed = 0;
  uint64_t offset = 0;
  explicit Generator(uint64_t s = 0, uint64_t o = 0) : seed(s), offset(o) {}
  // Reserves n counters and returns the first.
  uint64_t advance(uint64_t n) {
    const uint64_t first = offset;
    offset += n;
    return first;
  }
};

}  // namespace ember
