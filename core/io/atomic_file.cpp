// write_file_atomically, commit_temporary_file and commit_new_file: a
// temporary file in the same folder, fsync, rename over the target (or beside
// it, never over it), fsync of the folder (see core/io/atomic_file.h).
#include "core/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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

// fsync of the complete temporary (an Error naming `path` when it fails).
void fsync_temporary(const std::string& tmp, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(tmp, path, errno);
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) fail(tmp, path, err);
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
  fsync_temporary(tmp, path);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(tmp, path, errno);
  fsync_parent_folder(path);
}

bool commit_new_file(const std::string& tmp, const std::string& path) {
  fsync_temporary(tmp, path);
  int rc = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {  // no RENAME_NOREPLACE here: link fails on EEXIST too
    rc = ::link(tmp.c_str(), path.c_str());
    if (rc == 0) ::unlink(tmp.c_str());
  }
  if (rc != 0 && errno == EEXIST) {
    ::unlink(tmp.c_str());
    return false;
  }
  if (rc != 0) fail(tmp, path, errno);
  fsync_parent_folder(path);
  return true;
}

void write_file_atomically(const std::string& path, std::string_view content) {
  remove_dead_temporaries(path, ".tmp");  // what earlier writers of path killed mid-write left
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

int remove_dead_temporaries(const std::string& path, std::string_view separator) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const std::string prefix = target.filename().string() + std::string(separator);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() || name.size() > prefix.size() + 9 || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    // kill(pid, 0) fails with ESRCH only when no process has that id (EPERM: one runs).
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    if (e.is_regular_file(ignored) && fs::remove(e.path(), ignored)) ++removed;
  }
  return removed;
}

}  // namespace ember
