// Helpers shared by the kernel tests: random inputs in several memory layouts
// (contiguous, transposed, sliced with a step, expanded) and a closeness check
// of a kernel's output against reference values computed in double.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::testing {

inline Tensor random(const Shape& shape, DType dt, uint64_t seed, double lo = -3, double hi = 3) {
  if (is_floating(dt)) return Tensor::rand(shape, seed, 0, dt, lo, hi);
  std::vector<double> v = Tensor::rand(shape, seed, 0, DType::Float64, lo, hi).to_vector<double>();
  std::vector<int64_t> iv(v.size());
  for (size_t i = 0; i < v.size(); ++i) iv[i] = static_cast<int64_t>(std::floor(v[i]));
  return Tensor::from_vector(iv, shape).to(dt);
}

struct Layout {
  std::string name;
  Tensor t;
};

using MakeFn = std::function<Tensor(const Shape&, uint64_t seed)>;

// Tensors of one logical shape in different layouts, each made (contiguous)
// by make and then viewed: as is, transposed, sliced with step 2, expanded.
inline std::vector<Layout> layouts_of(const Shape& shape, uint64_t seed, const MakeFn& make) {
  std::vector<Layout> out;
  out.push_back({"contiguous", make(shape, seed)});
  if (shape.size() >= 2) {
    Shape s = shape;
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    out.push_back({"transposed", make(s, seed + 1).transpose(-1, -2)});
  }
  if (!shape.empty()) {
    Shape s = shape;
    s.back() = 2 * s.back() + 1;
    out.push_back({"sliced step 2", make(s, seed + 2).slice(-1, 1, s.back(), 2)});
    Shape one = shape;
    one[0] = 1;
    out.push_back({"expanded", make(one, seed + 3).expand(shape)});
  }
  return out;
}

// layouts_of with uniform random values in [lo, hi) (integers: floor of them).
inline std::vector<Layout> layouts(const Shape& shape, DType dt, uint64_t seed, double lo = -3,
                                   double hi = 3) {
  return layouts_of(shape, seed, [=](const Shape& s, uint64_t sd) { return random(s, dt, sd, lo, hi); });
}

// Calls f(index) for every multi-index of shape in row-major order.
inline void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  for (int64_t s : shape)
    if (s == 0) return;
  Shape idx(shape.size(), 0);
  while (true) {
    f(idx);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

inline double rtol_for(DType dt) { return dt == DType::Float32 ? 4e-6 : 1e-12; }
inline double atol_for(DType dt) { return dt == DType::Float32 ? 1e-6 : 1e-13; }

// Every element of got within atol + rtol |want| of want (NaN matches NaN, inf matches inf).
inline void check_close(const Tensor& got, const std::vector<double>& want, double rtol,
                        double atol) {
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  std::ostringstream bad;
  int nbad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = want[i];
    const bool ok = (std::isnan(w) && std::isnan(g[i])) || g[i] == w ||
                    std::abs(g[i] - w) <= atol + rtol * std::abs(w);
    if (!ok && nbad++ < 5)
      bad << "element " << i << ": got " << g[i] << ", want " << w << " (diff "
          << std::abs(g[i] - w) << ")\n";
  }
  INFO(bad.str());
  CHECK(nbad == 0);
}

inline void check_close(const Tensor& got, const std::vector<double>& want) {
  check_close(got, want, rtol_for(got.dtype()), atol_for(got.dtype()));
}

}  // namespace ember::testing
