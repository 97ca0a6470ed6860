// paged::norm_rows, the paged forward's RMSNorm and LayerNorm: bit for bit against one row at a
// time in a plain loop written here (mean and sum of squares in double, c in order), for row
// counts around its groups of 8 rows, with and without a bias, in place (what QK-norm does) and
// with row strides, and past the size where the rows are shared among threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "inference/model_runner/paged_kernels.h"
#include "kernel_testing.h"

using namespace ember::inference;

namespace {

std::vector<float> row_values(int64_t n, uint64_t seed) {
  return ember::testing::random({n}, ember::DType::Float32, seed).to_vector<float>();
}

// One row: the mean (LayerNorm), then the sum of squares, each in double in c order; each
// product and sum a separate rounding (volatile: no fused multiply-add, whatever the flags).
void reference_row(bool rms, const float* x, int64_t C, const float* w, const float* b, double eps, float* o) {
  double mean = 0;
  if (!rms) {
    for (int64_t c = 0; c < C; ++c) mean += x[c];
    mean /= static_cast<double>(C);
  }
  double ss = 0;
  for (int64_t c = 0; c < C; ++c) {
    volatile double sq = (x[c] - mean) * (x[c] - mean);
    ss += sq;
  }
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(C) + eps);
  for (int64_t c = 0; c < C; ++c) {
    volatile double scaled = (x[c] - mean) * inv * w[c];
    o[c] = static_cast<float>(scaled + (b ? b[c] : 0.0));
  }
}

}  // namespace

TEST_CASE("paged norms: every row equals a plain one-row loop, bit for bit", "[paged_forward]") {
  for (const std::string kind : {"rmsnorm", "layernorm"}) {
    for (const bool bias : {false, true}) {
      for (const int64_t R : {1, 5, 8, 9, 16, 17, 45}) {
        const int64_t C = R == 45 ? 1000 : 77, ld = C + 3, ldo = C + 5;  // 45 x 1000: threads
        const auto x = row_values(R * ld, 1), w = row_values(C, 2), b = row_values(C, 3);
        std::vector<float> out(static_cast<size_t>(R * ldo), -7.0f), ref(static_cast<size_t>(C));
        paged::norm_rows(kind, const_cast<float*>(x.data()), R, C, ld, w.data(), bias ? b.data() : nullptr, 1e-5,
                         out.data(), ldo);
        for (int64_t r = 0; r < R; ++r) {
          INFO(kind << " bias " << bias << " R " << R << " row " << r);
          reference_row(kind == "rmsnorm", x.data() + r * ld, C, w.data(), bias ? b.data() : nullptr, 1e-5, ref.data());
          CHECK(std::memcmp(out.data() + r * ldo, ref.data(), static_cast<size_t>(C) * 4) == 0);
          for (int64_t c = C; c < ldo; ++c) CHECK(out[r * ldo + c] == -7.0f);  // nothing past C
        }
        // In place (x == out), as QK-norm calls it: the same values.
        std::vector<float> inplace = x;
        paged::norm_rows(kind, inplace.data(), R, C, ld, w.data(), bias ? b.data() : nullptr, 1e-5, inplace.data(), ld);
        for (int64_t r = 0; r < R; ++r) {
          INFO(kind << " in place, R " << R << " row " << r);
          CHECK(std::memcmp(inplace.data() + r * ld, out.data() + r * ldo, static_cast<size_t>(C) * 4) == 0);
        }
      }
    }
  }
}
