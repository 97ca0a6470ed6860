// read_file (see read_file.h): open, fstat to tell a folder, then read to the
// end (the size is only a hint: /proc files say 0), retrying on EINTR, and
// stopping past max_bytes.
#include "core/io/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace ember {

std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EMBER_CHECK(fd >= 0, path, ": cannot open the ", what, ": ", std::strerror(errno));
  struct stat st {};
  const bool folder = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  std::string text;
  int err = 0;
  bool too_long = false;
  if (!folder) {
    text.reserve(st.st_size > 0 ? static_cast<size_t>(std::min<uint64_t>(st.st_size, max_bytes)) : 0);
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) err = errno;
      if (n <= 0) break;
      if (text.size() + static_cast<uint64_t>(n) > max_bytes) {
        too_long = true;
        break;
      }
      text.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  EMBER_CHECK(!folder, path, ": is a folder, not the ", what);
  EMBER_CHECK(err == 0, path, ": cannot read the ", what, ": ", std::strerror(err));
  EMBER_CHECK(!too_long, path, ": the ", what, " is larger than ", max_bytes >> 20,
              " MiB, more than such a file holds (an endless stream or device?)");
  return text;
}

}  // namespace ember
