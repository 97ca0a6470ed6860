// Linked into the capped test programs of tests/isa only: the run-time caps of
// the variant EMBER_ISA_VARIANT ("avx2" or "generic") are in force, as the
// environment of its CTest entries sets them. (The build-time cap of the
// clones is checked on the binaries' symbols: check_clones.cmake.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/kernels/cpu_isa.h"
#include "apps/common/fma_peak.h"
#include "core/kernels/matmul.h"

using namespace ember;

namespace {

// /proc/cpuinfo's flags line, a space at each end ("" without /proc/cpuinfo).
std::string cpuinfo_flags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  return line.rfind("flags", 0) == 0 ? line.substr(line.find(':') + 1) + " " : "";
}

bool has(const std::string& flags, const char* flag) {
  std::string word = " ";  // (not " " + std::string(flag): GCC 12 warns -Wrestrict on it)
  word.append(flag).append(" ");
  return flags.find(word) != std::string::npos;
}

}  // namespace

TEST_CASE("the ISA cap of this variant is in force", "[isa]") {
  const std::string variant = EMBER_ISA_VARIANT;
  const char* env = std::getenv("EMBER_MAX_ISA");
  REQUIRE(env != nullptr);
  CHECK(env == variant);
  const std::string flags = cpuinfo_flags();
  const bool avx2 = has(flags, "avx2") && has(flags, "fma");
  // ember's own dispatch: the FMA peak kernel and the bf16 kernels stop at the cap.
  CHECK(std::string(apps::fma_peak_isa(DType::Float32)) == (variant == "avx2" && avx2 ? "avx2" : "generic"));
  CHECK(std::string(apps::fma_peak_isa(DType::BFloat16)).empty());
  CHECK_FALSE(kernels::isa_available(kernels::Isa::Avx512));
  // oneDNN: capped by ONEDNN_MAX_CPU_ISA (avx2) or by EMBER_MAX_ISA passed on (generic -> sse41).
  if (!flags.empty()) {
    const std::string want = variant == "avx2" && avx2                ? "avx2"
                             : variant == "avx2" && has(flags, "avx") ? "avx"
                             : has(flags, "sse4_1")                   ? "sse41"
                                                                      : "reference";
    CHECK(std::string(kernels::onednn_cpu_isa()) == want);
  }
  CHECK_FALSE(kernels::bf16_matmul_native());
}
