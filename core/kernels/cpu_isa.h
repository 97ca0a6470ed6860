// The instruction sets ember's own run-time dispatch may use: what the CPU
// runs, capped by the environment variable EMBER_MAX_ISA (generic, avx2 or
// avx512), as oneDNN's ONEDNN_MAX_CPU_ISA caps oneDNN's. kernels/matmul.cpp
// passes the cap on to oneDNN when ONEDNN_MAX_CPU_ISA is unset. The functions
// compiled with EMBER_TARGET_CLONES are picked when the program loads, before
// any code could read a variable: they are capped at build time (core/simd.h).
#pragma once

namespace ember::kernels {

// Nested levels: each includes the ones before it.
enum class Isa {
  Generic,     // baseline x86-64 (SSE2), or a CPU that is not x86
  Avx2,        // AVX2 + FMA
  Avx512,      // AVX-512 F
  Avx512Bf16,  // AVX-512 F + BF16, and AMX tiles where the CPU has them (the highest level; no cap)
};

const char* isa_name(Isa isa);  // "generic", "avx2", "avx512", "avx512_bf16"

// EMBER_MAX_ISA's level (any case); Avx512Bf16, i.e. no cap, when it is unset
// or empty. Throws ember::Error on any other value. Read at every call.
Isa max_isa();

// True when the CPU (and OS) run `isa` and EMBER_MAX_ISA allows it.
bool isa_available(Isa isa);

}  // namespace ember::kernels
