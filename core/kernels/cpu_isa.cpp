// EMBER_MAX_ISA and the CPU's flags (see cpu_isa.h).
#include "core/kernels/cpu_isa.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ember::kernels {

namespace {

// The highest level the CPU and OS run (__builtin_cpu_supports checks the OS's XSAVE state too).
Isa cpu_isa() {
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    return __builtin_cpu_supports("avx512bf16") ? Isa::Avx512Bf16 : Isa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Generic;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Generic: return "generic";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512_bf16";
  }
  return "?";
}

Isa max_isa() {
  const char* env = std::getenv("EMBER_MAX_ISA");
  std::string value = env ? env : "";
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  if (value.empty()) return Isa::Avx512Bf16;
  for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512}) {
    if (value == isa_name(isa)) return isa;
  }
  throw Error("EMBER_MAX_ISA: expected generic, avx2 or avx512 (or unset), got \"" + std::string(env) + "\"");
}

bool isa_available(Isa isa) {
  return isa <= cpu_isa() && isa <= max_isa();
}

}  // namespace ember::kernels
