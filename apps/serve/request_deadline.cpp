// A connection loop for httplib::Server (apps/serve/request_deadline.h): the library's
// own (process_and_close_socket, a virtual of httplib 0.11.4) with a deadline per request.
// The library reads a request only through the Stream it is handed (request line, headers,
// then the body, all before the handler runs; a handler only writes), so a Stream whose
// reads stop at the deadline bounds the whole request and never touches a running handler.
#include "apps/serve/request_deadline.h"

#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace ember::apps::serve {
namespace {

using Clock = std::chrono::steady_clock;

thread_local RequestCut t_request_cut = RequestCut::none;

// poll() for `events` up to `ms` milliseconds (EINTR retried): > 0 ready, 0 timeout, < 0 error.
int wait_socket(int sock, short events, int64_t ms) {
  pollfd p{sock, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30)));
  } while (r < 0 && errno == EINTR);
  return r;
}

int64_t ms_until(Clock::time_point t) {
  return std::chrono::ceil<std::chrono::milliseconds>(t - Clock::now()).count();
}

void ip_and_port(bool local, int sock, std::string& ip, int& port) {
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

// httplib's SocketStream (same read buffering, timeouts and liveness test) whose reads fail
// once the request's deadline passes or its head (up to the blank line) outgrows
// kMaxHeaderBytes; the reason goes to t_request_cut.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int sock, Clock::time_point deadline, int64_t read_ms, int64_t write_ms)
      : sock_(sock), deadline_(deadline), read_ms_(read_ms), write_ms_(write_ms) {
    t_request_cut = RequestCut::none;
  }
  bool is_readable() const override {
    if (t_request_cut != RequestCut::none) return false;
    const int64_t left = ms_until(deadline_);
    if (left > 0 && wait_socket(sock_, POLLIN, std::min(read_ms_, left)) > 0) return true;
    if (Clock::now() >= deadline_) t_request_cut = RequestCut::timeout;
    return false;
  }
  bool is_writable() const override {
    if (wait_socket(sock_, POLLOUT, write_ms_) <= 0) return false;
    if (wait_socket(sock_, POLLIN, 0) == 0) return true;  // the peer is still there
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK) > 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    if (buffered_ == 0) {
      if (!is_readable()) return -1;
      ssize_t n;
      do {
        n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      offset_ = 0;
      buffered_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, buffered_);
    std::memcpy(ptr, buffer_.data() + offset_, n);
    offset_ += n;
    buffered_ -= n;
    if (!head_done_ && !count_head(ptr, n)) return -1;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip_and_port(false, sock_, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip_and_port(true, sock_, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  // Follows the bytes handed out until the head's blank line ("\r\n\r\n"); false past the cap.
  bool count_head(const char* p, size_t n) {
    for (size_t i = 0; i < n && !head_done_; ++i) {
      tail_ = (tail_ << 8) | static_cast<unsigned char>(p[i]);
      head_done_ = (tail_ & 0xffffffffu) == 0x0d0a0d0au;
      if (++head_bytes_ > kMaxHeaderBytes && !head_done_) {
        t_request_cut = RequestCut::headers_too_large;
        return false;
      }
    }
    return true;
  }

  int sock_;
  Clock::time_point deadline_;
  int64_t read_ms_, write_ms_;
  std::array<char, 4096> buffer_;
  size_t offset_ = 0, buffered_ = 0;
  bool head_done_ = false;
  uint64_t tail_ = 0;
  size_t head_bytes_ = 0;
};

class DeadlineServer : public httplib::Server {
 public:
  explicit DeadlineServer(double request_timeout_seconds)
      : timeout_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(request_timeout_seconds))) {
    set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    // A request cut short closes its connection (what is left of it cannot be parsed).
    set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
      if (t_request_cut == RequestCut::none) return;
      res.headers.erase("Keep-Alive");
      res.headers.erase("Connection");
      res.set_header("Connection", "close");
    });
  }
  void deepen_backlog(int backlog) { ::listen(svr_sock_, backlog); }

 private:
  // The library's keep-alive wait for the next request's first byte, also bounded by the
  // request's deadline and ended by stop().
  bool next_request_arrives(int sock, Clock::time_point deadline) const {
    const auto idle_end =
        std::min(deadline, Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_));
    while (svr_sock_ != INVALID_SOCKET) {
      const int64_t left = ms_until(idle_end);
      const int r = wait_socket(sock, POLLIN, std::min<int64_t>(std::max<int64_t>(left, 0), 100));
      if (r != 0) return r > 0;
      if (left <= 0) return false;
    }
    return false;
  }

  bool process_and_close_socket(socket_t sock) override {
    const int64_t read_ms = read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000;
    const int64_t write_ms = write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000;
    bool ok = false;
    auto deadline = Clock::now() + timeout_;
    for (size_t left = keep_alive_max_count_; left > 0 && next_request_arrives(sock, deadline);
         --left) {
      bool connection_closed = false;
      DeadlineStream strm(sock, deadline, read_ms, write_ms);
      ok = process_request(strm, left == 1, connection_closed, nullptr);
      if (!ok || connection_closed || t_request_cut != RequestCut::none) break;
      deadline = Clock::now() + timeout_;  // the idle time before the next request counts
    }
    t_request_cut = RequestCut::none;
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  Clock::duration timeout_;
};

}  // namespace

std::unique_ptr<httplib::Server> make_http_server(double request_timeout_seconds) {
  return std::make_unique<DeadlineServer>(request_timeout_seconds);
}

void deepen_backlog(httplib::Server& server, int backlog) {
  static_cast<DeadlineServer&>(server).deepen_backlog(backlog);
}

RequestCut request_cut() {
  return t_request_cut;
}

}  // namespace ember::apps::serve
