// Physical pages x page size (sysconf), or the cgroup v2 / v1 limit when lower.
#include "core/system_memory.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace ember {
namespace {

// A cgroup limit file holds a byte count, or "max" (v2) / a huge number (v1) for none.
int64_t read_limit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  if (text.size() > 18) return 0;  // beyond 10^18 bytes: no limit
  return std::stoll(text);
}

}  // namespace

SystemMemory system_memory() {
  SystemMemory m;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) {
    m.bytes = static_cast<int64_t>(pages) * static_cast<int64_t>(page);
    m.what = "physical memory";
  }
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t limit = read_limit(path);
    if (limit > 0 && (m.bytes == 0 || limit < m.bytes)) {
      m.bytes = limit;
      m.what = "cgroup memory limit";
    }
  }
  return m;
}

std::string bytes_str(long double bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%.0Lf bytes", bytes);
    return buf;
  }
  int u = -1;
  while (bytes >= 1024 && u < 7) {
    bytes /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof buf, bytes < 10 ? "%.2Lf %s" : bytes < 100 ? "%.1Lf %s" : "%.0Lf %s",
                bytes, units[u]);
  return buf;
}

}  // namespace ember
