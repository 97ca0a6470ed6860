// Function multiversioning for hot loops, and a branch-free select.
// EMBER_TARGET_CLONES compiles a function for AVX-512, AVX2 and baseline
// x86-64 and picks one when the program loads (GCC ifunc), so a portable
// build (no -march) still runs wide vectors. blend(c, a, b) is c ? a : b as a
// bit mask: with GCC's default -ftrapping-math a ternary whose arm does float
// arithmetic becomes a branch and stops the loop from vectorizing.
// No environment variable can cap the clone choice (the resolvers run before
// any code of ember), so tests of the narrower clones build them capped:
// EMBER_MAX_CLONE_AVX2 keeps the AVX2 and baseline clones only, EMBER_NO_CLONES
// the baseline alone (tests/isa/CMakeLists.txt).
#pragma once
#include <bit>
#include <cstdint>
#include <type_traits>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(EMBER_NO_CLONES)
#if defined(EMBER_MAX_CLONE_AVX2)
#define EMBER_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define EMBER_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#else
#define EMBER_TARGET_CLONES
#endif

namespace ember {

// c ? a : b without a branch (T float or double).
template <class T>
inline T blend(bool c, T a, T b) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U m = U(0) - static_cast<U>(c);
  return std::bit_cast<T>((std::bit_cast<U>(a) & m) | (std::bit_cast<U>(b) & ~m));
}

}  // namespace ember
