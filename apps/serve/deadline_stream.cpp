// A request's reads with a deadline over a connection's socket
// (apps/serve/deadline_stream.h): the library's SocketStream (same timeouts and
// liveness test), with bytes handed out first and reads bounded by the deadline.
#include "apps/serve/deadline_stream.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace ember::apps::serve {
namespace {

int64_t ms_until(DeadlineStream::Clock::time_point t) {
  return std::chrono::ceil<std::chrono::milliseconds>(t - DeadlineStream::Clock::now()).count();
}

void socket_ip_and_port(bool local, int sock, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* a = reinterpret_cast<sockaddr*>(&addr);
  if ((local ? getsockname(sock, a, &len) : getpeername(sock, a, &len)) != 0) return;
  if (addr.ss_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  else if (addr.ss_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  else
    return;
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(a, len, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) == 0)
    ip = host.data();
}

// poll() for `events` up to `ms` milliseconds (EINTR retried): > 0 ready, 0 timeout, < 0 error.
int wait_socket(int sock, short events, int64_t ms) {
  pollfd p{sock, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30)));
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

DeadlineStream::DeadlineStream(int sock, Clock::time_point deadline, int64_t read_ms,
                               int64_t write_ms, std::string pending, bool& timed_out)
    : sock_(sock),
      deadline_(deadline),
      read_ms_(read_ms),
      write_ms_(write_ms),
      pending_(std::move(pending)),
      timed_out_(timed_out) {}

bool DeadlineStream::is_readable() const {
  if (offset_ < pending_.size()) return true;
  if (timed_out_) return false;
  const int64_t left = ms_until(deadline_);
  if (left > 0 && wait_socket(sock_, POLLIN, std::min(read_ms_, left)) > 0) return true;
  if (Clock::now() >= deadline_) timed_out_ = true;
  return false;
}

bool DeadlineStream::is_writable() const {
  if (wait_socket(sock_, POLLOUT, write_ms_) <= 0) return false;
  if (wait_socket(sock_, POLLIN, 0) == 0) return true;  // the peer is still there
  char c;
  return ::recv(sock_, &c, 1, MSG_PEEK) > 0;
}

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (offset_ == pending_.size()) {
    if (!is_readable()) return -1;
    std::array<char, 4096> buffer;
    ssize_t n;
    do {
      n = ::recv(sock_, buffer.data(), buffer.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    pending_.assign(buffer.data(), static_cast<size_t>(n));
    offset_ = 0;
  }
  const size_t n = std::min(size, pending_.size() - offset_);
  std::memcpy(ptr, pending_.data() + offset_, n);
  offset_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  ssize_t n;
  do {
    n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void DeadlineStream::ip_and_port(bool local, std::string& ip, int& port) const {
  socket_ip_and_port(local, sock_, ip, port);
}

std::string DeadlineStream::take_pending() {
  std::string rest = pending_.substr(offset_);
  pending_.clear();
  offset_ = 0;
  return rest;
}

void DeadlineStream::put_back(std::string bytes) {
  pending_ = std::move(bytes) + pending_.substr(offset_);
  offset_ = 0;
}

}  // namespace ember::apps::serve
