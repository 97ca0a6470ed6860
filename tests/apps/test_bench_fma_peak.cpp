// The FMA peak (apps::fma_round_flops rounds, apps::measure_fma_peak) and
// the cap EMBER_MAX_ISA puts on ember's own
// dispatch (kernels/cpu_isa.h): the measurement runs and gives a finite,
// positive rate (0 for bf16 where AVX512-BF16 is absent or capped), the kernel
// it picks is the widest that /proc/cpuinfo's flags and EMBER_MAX_ISA allow,
// and bad inputs throw. No test compares speeds: `ember bench` measures them.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/common/matmul_peak.h"
#include "core/kernels/cpu_isa.h"
#include "core/kernels/matmul.h"
#include "apps/common/fma_peak.h"
#include "scoped_env.h"

using namespace ember;

using ember::testing::ScopedEnv;

namespace {

// Short rounds keep the test well under a second.
double fma_peak(DType dt) { return apps::measure_fma_peak(dt, 2, 0.01); }

// /proc/cpuinfo's flags line with a space at each end; nullopt without /proc/cpuinfo.
std::optional<std::string> cpuinfo_flags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.rfind("flags", 0) != 0) return std::nullopt;
  return line.substr(line.find(':') + 1) + " ";
}

bool has(const std::string& flags, const char* flag) {
  std::string word = " ";  // (not " " + std::string(flag): GCC 12 warns -Wrestrict on it)
  word.append(flag).append(" ");
  return flags.find(word) != std::string::npos;
}

// The level names of kernels/cpu_isa.h, lowest first, and EMBER_MAX_ISA's index among them (3: unset).
const char* const kLevels[] = {"generic", "avx2", "avx512", "avx512_bf16"};
int env_cap() {
  const char* v = std::getenv("EMBER_MAX_ISA");
  if (!v || !*v) return 3;
  std::string s = v;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int i = 0; i < 3; ++i) {
    if (s == kLevels[i]) return i;
  }
  FAIL("unexpected EMBER_MAX_ISA " << s);
  return 0;
}

// The level /proc/cpuinfo's flags give: avx512f (+ avx512_bf16), avx2 with fma, or none.
int cpuinfo_level(const std::string& flags) {
  if (has(flags, "avx512f")) return has(flags, "avx512_bf16") ? 3 : 2;
  return has(flags, "avx2") && has(flags, "fma") ? 1 : 0;
}

}  // namespace

TEST_CASE("float32 FMA peak runs and is finite and positive", "[fma_peak]") {
  const double f32 = fma_peak(DType::Float32);
  INFO("float32 FMA peak " << f32 / 1e9 << " GFLOP/s on " << apps::fma_peak_isa(DType::Float32));
  CHECK(std::isfinite(f32));
  CHECK(f32 > 0);
}

TEST_CASE("the FMA kernels are the widest the CPU's flags and EMBER_MAX_ISA allow", "[fma_peak][isa]") {
  const auto flags = cpuinfo_flags();
  if (!flags) return;  // no /proc/cpuinfo: nothing independent to compare with
  const int level = std::min(cpuinfo_level(*flags), env_cap());
  CHECK(std::string(apps::fma_peak_isa(DType::Float32)) == kLevels[std::min(level, 2)]);
  CHECK(kernels::isa_available(kernels::Isa::Avx512Bf16) == (level == 3));
  const double bf16 = fma_peak(DType::BFloat16);
  INFO("bf16 FMA peak " << bf16 / 1e9 << " GFLOP/s");
  if (level == 3) {
    CHECK(std::string(apps::fma_peak_isa(DType::BFloat16)) == "avx512_bf16");
    CHECK(std::isfinite(bf16));
    CHECK(bf16 > 0);
  } else {
    CHECK(std::string(apps::fma_peak_isa(DType::BFloat16)).empty());
    CHECK(bf16 == 0);
  }
}

TEST_CASE("EMBER_MAX_ISA caps the FMA kernels, and other values are an error", "[fma_peak][isa]") {
  const auto flags = cpuinfo_flags();
  {
    ScopedEnv cap("EMBER_MAX_ISA", "generic");
    CHECK(kernels::max_isa() == kernels::Isa::Generic);
    CHECK(std::string(apps::fma_peak_isa(DType::Float32)) == "generic");
    CHECK(std::string(apps::fma_peak_isa(DType::BFloat16)).empty());
    CHECK(fma_peak(DType::BFloat16) == 0);
    const double generic = fma_peak(DType::Float32);
    CHECK(std::isfinite(generic));
    CHECK(generic > 0);
  }
  {
    ScopedEnv cap("EMBER_MAX_ISA", "AVX2");  // any case, as ONEDNN_MAX_CPU_ISA
    CHECK(kernels::max_isa() == kernels::Isa::Avx2);
    if (flags) CHECK(std::string(apps::fma_peak_isa(DType::Float32)) == kLevels[std::min(cpuinfo_level(*flags), 1)]);
    CHECK_FALSE(kernels::isa_available(kernels::Isa::Avx512));
  }
  {
    ScopedEnv cap("EMBER_MAX_ISA", "");  // empty: no cap
    CHECK(kernels::max_isa() == kernels::Isa::Avx512Bf16);
  }
  ScopedEnv cap("EMBER_MAX_ISA", "sse9");
  CHECK_THROWS_WITH(apps::measure_fma_peak(DType::Float32),
                    Catch::Contains("EMBER_MAX_ISA: expected generic, avx2 or avx512 (or unset), got \"sse9\""));
  CHECK_THROWS_WITH(kernels::isa_available(kernels::Isa::Generic), Catch::Contains("EMBER_MAX_ISA"));
}

TEST_CASE("FMA peak rejects other dtypes and bad round counts", "[fma_peak]") {
  CHECK_THROWS_WITH(apps::measure_fma_peak(DType::Int64), Catch::Contains("float32 or bfloat16, got int64"));
  CHECK_THROWS_WITH(apps::fma_round_flops(DType::Int64), Catch::Contains("float32 or bfloat16, got int64"));
  CHECK_THROWS_WITH(apps::measure_fma_peak(DType::Float32, 0), Catch::Contains("rounds"));
  CHECK_THROWS_WITH(apps::fma_round_flops(DType::Float32, 0), Catch::Contains("round_seconds"));
}

TEST_CASE("matmul peak: the fastest of the measured layouts", "[bench]") {
  // The rule on given figures: the maximum, its layout; the first on a tie.
  apps::MatmulPeak p = apps::best_candidate({{"A B", 410e9}, {"A B^T", 440e9}}, 12);
  CHECK(p.flops == 440e9);
  CHECK(std::string(p.layout) == "A B^T");
  CHECK(p.products == 12);
  REQUIRE(p.candidates.size() == 2);
  p = apps::best_candidate({{"A B", 300e9}, {"A B^T", 300e9}}, 6);
  CHECK(std::string(p.layout) == "A B");
  // Measured: one product per layout per round; the peak is the best candidate (bf16 only where
  // native: emulated 1024^3 bf16 products under the capped ISA variants take seconds).
  std::vector<DType> dtypes{DType::Float32};
  if (kernels::bf16_matmul_native()) dtypes.push_back(DType::BFloat16);
  for (DType dt : dtypes) {
    const apps::MatmulPeak m = apps::measure_peak(1, 2, dt);
    REQUIRE(m.candidates.size() == 2);
    CHECK(m.products == 2);
    double best = 0;
    for (const apps::PeakCandidate& c : m.candidates) {
      CHECK(std::isfinite(c.flops));
      CHECK(c.flops > 0);
      best = std::max(best, c.flops);
    }
    CHECK(m.flops == best);
  }
}

TEST_CASE("oneDNN ISA names: each dnnl_cpu_isa_t value of oneDNN 2.6 maps to its name", "[bench]") {
  // The values of dnnl_types.h (oneDNN 2.6): nested bit masks.
  const std::pair<int, const char*> names[] = {
      {0x0, "reference"},           {0x1, "sse41"},
      {0x3, "avx"},                 {0x7, "avx2"},
      {0xf, "avx512_mic"},          {0x1f, "avx512_mic_4ops"},
      {0x27, "avx512_core"},        {0x67, "avx512_core_vnni"},
      {0xe7, "avx512_core_bf16"},   {0x3e7, "avx512_core_amx"},
      {0x407, "avx2_vnni"},         {0x12345, "reference"}};
  for (const auto& [value, name] : names) CHECK(std::string(kernels::onednn_isa_name(value)) == name);
  // What oneDNN runs here is one of them.
  const std::string here = kernels::onednn_cpu_isa();
  CHECK(std::any_of(std::begin(names), std::end(names), [&](const auto& n) { return here == n.second; }));
}
