// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI, ext4 and
// leveldb use it: crc32c("123456789") == 0xE3069283. Hardware crc32
// instructions (SSE4.2) when the CPU has them, a table otherwise.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember {

// The CRC of the bytes already seen (`crc`, 0 to start) extended by data[0, n).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);

}  // namespace ember
