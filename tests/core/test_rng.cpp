// Philox4x32-10 against the Random123 known-answer vectors; rand/randn are
// independent of thread count and offsets compose; rough moments.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "core/tensor.h"

using namespace ember;

TEST_CASE("philox4x32-10 matches the Random123 known-answer tests", "[rng]") {
  // kat_vectors: counter = {0,0,0,0}, key = {0,0}.
  CHECK(philox4x32(0, 0, 0) == std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  // counter = all ones, key = all ones.
  CHECK(philox4x32(~0ull, ~0ull, ~0ull) ==
        std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  // counter = {243f6a88, 85a308d3, 13198a2e, 03707344}, key = {a4093822, 299f31d0}.
  CHECK(philox4x32(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull) ==
        std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("random tensors do not depend on the thread count", "[rng]") {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor a = Tensor::randn({300, 257}, 42, 5, DType::Float32);
  omp_set_num_threads(2);
  Tensor b = Tensor::randn({300, 257}, 42, 5, DType::Float32);
  omp_set_num_threads(saved);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
}

TEST_CASE("a generator's consecutive draws equal one draw at the same offsets", "[rng]") {
  Generator g(7);
  Tensor first = Tensor::rand({10}, g, DType::Float64);
  Tensor second = Tensor::rand({5}, g, DType::Float64);
  CHECK(g.offset == 15);
  Tensor whole = Tensor::rand({15}, 7, 0, DType::Float64);
  auto w = whole.to_vector<double>();
  auto s = second.to_vector<double>();
  CHECK(std::vector<double>(w.begin() + 10, w.end()) == s);
  CHECK(Tensor::rand({3}, 8, 0).to_vector<float>() != Tensor::rand({3}, 7, 0).to_vector<float>());
}

TEST_CASE("rand and randn have the right moments", "[rng]") {
  const int64_t n = 200000;
  auto u = Tensor::rand({n}, 1, 0, DType::Float64, -1, 3).to_vector<double>();
  auto z = Tensor::randn({n}, 2, 0, DType::Float64, 1, 2).to_vector<double>();
  double su = 0, umin = 1e9, umax = -1e9, sz = 0, szz = 0;
  for (double x : u) su += x, umin = std::min(umin, x), umax = std::max(umax, x);
  for (double x : z) sz += x, szz += x * x;
  const double mz = sz / n, vz = szz / n - mz * mz;
  CHECK(su / n == Approx(1.0).margin(0.02));
  CHECK(umin >= -1.0);
  CHECK(umax < 3.0);
  CHECK(mz == Approx(1.0).margin(0.02));
  CHECK(std::sqrt(vz) == Approx(2.0).margin(0.02));
}
