// How much memory this process may use: the machine's physical RAM, lowered
// to the cgroup limit when one is set (a container), and a human form of
// byte counts for messages such as "needs 3.2 TiB but this machine has 23.4 GiB".
#pragma once
#include <cstdint>
#include <string>

namespace ember {

struct SystemMemory {
  int64_t bytes = 0;  // 0 when unknown (then nothing is refused)
  std::string what;   // "physical memory" or "cgroup memory limit"
};

SystemMemory system_memory();

// "512 bytes", "1.5 KiB", "23.4 GiB", "3.2 TiB" (powers of 1024).
std::string bytes_str(long double bytes);

}  // namespace ember
