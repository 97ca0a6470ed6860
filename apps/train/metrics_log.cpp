// MetricsLog (see metrics_log.h): POSIX append with truncation back to the
// last newline on open and after a failed write.
#include "apps/train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace ember::apps {
namespace {

// The file's size without a trailing partial line (the offset after its last '\n').
off_t complete_lines_size(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return -1;
  char buf[4096];
  for (off_t end = st.st_size; end > 0;) {
    const off_t begin = end > static_cast<off_t>(sizeof buf) ? end - static_cast<off_t>(sizeof buf) : 0;
    const ssize_t got = ::pread(fd, buf, static_cast<size_t>(end - begin), begin);
    if (got != end - begin) return -1;
    for (off_t i = got - 1; i >= 0; --i) {
      if (buf[i] == '\n') return begin + i + 1;
    }
    end = begin;
  }
  return 0;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  EMBER_CHECK(fd_ >= 0, path, ": cannot open for appending: ", std::strerror(errno));
  const off_t complete = complete_lines_size(fd_);
  EMBER_CHECK(complete >= 0 && ::ftruncate(fd_, complete) == 0, path, ": cannot read or repair: ",
              std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::append(const std::string& line) {
  if (fd_ < 0) return;
  const std::string text = line + "\n";
  struct stat st {};
  const off_t before = ::fstat(fd_, &st) == 0 ? st.st_size : -1;
  // One write() normally; after a short one (the disk filled up mid-line)
  // the next attempt returns the reason (ENOSPC, EFBIG).
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      if (before >= 0) (void)!::ftruncate(fd_, before);
      throw Error(detail::concat(path_, ": cannot append a line: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace ember::apps
