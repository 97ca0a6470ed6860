// AMX, the tile unit of Intel's Sapphire Rapids and later: what int8 (kernels/matmul_q8.cpp)
// and bfloat16 (kernels/matmul_bf16_tiles.cpp) products share: the process's permission to use
// the tile state, and loading a tile configuration.
#pragma once
#include <cstdint>

namespace ember::kernels::amx {

// Linux hands a process the AMX tile state only when asked (arch_prctl ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA); asked once. False where the kernel or the hypervisor refuses, and off x86.
bool granted();

// ldtilecfg's 64-byte operand (palette 1): each tile register's rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

#if defined(__GNUC__) && defined(__x86_64__)
// ldtilecfg on the whole of c. (GCC 12's _tile_loadconfig tells the compiler it reads only 8 of
// the 64 bytes, so the stores of the rows and widths may be dropped before it: a #UD later.)
inline void load_config(const TileConfig& c) { asm volatile("ldtilecfg %0" : : "m"(c)); }
#endif

}  // namespace ember::kernels::amx
