// The run folder's lock (see run_lock.h): flock(LOCK_EX | LOCK_NB); the
// holder writes its pid into the file for the second run's message.
#include "apps/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace ember::apps {

namespace {

// The pid the holder wrote into the lock file, without its newline ("" when none yet).
std::string holder_pid(int fd) {
  char pid[32] = {};
  const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
  std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  return holder;
}

}  // namespace

RunLock::RunLock(const std::string& out_dir) {
  const std::string path = (std::filesystem::path(out_dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  EMBER_CHECK(fd_ >= 0, "--out ", out_dir, ": cannot create ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = holder_pid(fd_);
    ::close(fd_);
    fd_ = -1;
    EMBER_CHECK(err != EWOULDBLOCK, "--out ", out_dir, ": another ember run",
                holder.empty() ? std::string() : " (pid " + holder + ")",
                " is using this folder; wait for it to end or give another --out");
    throw Error(detail::concat("--out ", out_dir, ": cannot lock ", path, ": ", std::strerror(err)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t w = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> run_lock_holder(const std::string& out_dir) {
  const std::string path = (std::filesystem::path(out_dir) / ".lock").string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) holder = holder_pid(fd);
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return holder;
}

}  // namespace ember::apps
