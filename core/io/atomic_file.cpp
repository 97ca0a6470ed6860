// write_file_atomically and commit_temporary_file: a temporary file in the
// same folder, fsync, rename over the target, fsync of the folder (see
// core/io/atomic_file.h).
#include "core/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace ember {
namespace {

[[noreturn]] void fail(const std::string& tmp, const std::string& path, int err) {
  ::unlink(tmp.c_str());
  throw Error(detail::concat("cannot write '", path, "': ", std::strerror(err)));
}

}  // namespace

void fsync_parent_folder(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const int fd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void commit_temporary_file(const std::string& tmp, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(tmp, path, errno);
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) fail(tmp, path, err);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(tmp, path, errno);
  fsync_parent_folder(path);
}

void write_file_atomically(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  EMBER_CHECK(fd >= 0, "cannot write '", path, "': ", std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail(tmp, path, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) fail(tmp, path, errno);
  commit_temporary_file(tmp, path);
}

}  // namespace ember
