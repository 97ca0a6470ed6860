// The connection gate of `ember serve` (apps/serve/connection_gate.h): one poll()
// thread over the connections that wait for a request head, for the next request
// on a kept-alive connection, or to close after their last answer.
#include "apps/serve/connection_gate.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "apps/serve/api_error.h"
#include "apps/serve/request_deadline.h"
#include "apps/serve/request_head.h"

namespace ember::apps::serve {
namespace {

// A connection closing after its answer reads and drops what its client still sends, as
// nginx's lingering close does, for this long and this many bytes at most.
constexpr auto kLingerTime = std::chrono::seconds(5);
constexpr size_t kLingerBytes = size_t{64} << 20;

std::string peer_address(int sock) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  std::array<char, NI_MAXHOST> host{};
  if (getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host.data(), host.size(), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return "";
  }
  return host.data();
}

// An HTTP response written straight to the socket (it is empty: the write does not block).
void answer_now(int sock, const ApiError& e) {
  const std::string body = json_text(error_json(e));
  const std::string text = "HTTP/1.1 " + std::to_string(e.status()) +
                           " Service Unavailable\r\nContent-Type: application/json\r\n"
                           "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  (void)::send(sock, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

int64_t ms_until(Clock::time_point t, Clock::time_point now) {
  return std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
}

}  // namespace

enum class Phase { idle, head, linger };

struct ConnectionGate::Waiting {
  Connection c;
  Phase phase = Phase::head;
  Clock::time_point until;  // idle: the keep-alive's end; head: the head's; linger: the close
  size_t discarded = 0;     // linger: bytes dropped
};

ConnectionGate::ConnectionGate(GateOptions options, Dispatch dispatch)
    : o_(std::move(options)), dispatch_(std::move(dispatch)) {
  if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { loop(); });
}

ConnectionGate::~ConnectionGate() {
  if (thread_.joinable()) shutdown();
  for (const int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void ConnectionGate::shutdown() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  (void)!::write(wake_[1], "x", 1);
  thread_.join();
}

void ConnectionGate::admit(int sock) {
  Connection c;
  c.sock = sock;
  c.peer = peer_address(sock);
  const Clock::time_point now = Clock::now();
  c.request_deadline = now + o_.request_timeout;
  c.requests_left = o_.max_requests;
  int64_t open = 0;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!c.peer.empty()) open = ++open_[c.peer];
  }
  if (o_.max_per_client > 0 && open > o_.max_per_client) {
    answer_now(sock,
               ApiError(503,
                        "this client address already has " + std::to_string(o_.max_per_client) +
                            " open connections, the most this server allows one address "
                            "(ember serve --max-connections-per-client); retry later",
                        "", "too_many_connections"));
    if (o_.count_refusal) o_.count_refusal(503);
    {  // only a counted address can be over its bound
      const std::lock_guard<std::mutex> lock(mu_);
      if (--open_[c.peer] <= 0) open_.erase(c.peer);
    }
    c.peer.clear();  // a refused connection is not counted while it lingers
    finish(std::move(c));
    return;
  }
  const Clock::time_point until = std::min(c.request_deadline, now + o_.header_timeout);
  put({std::move(c), Phase::head, until});
}

void ConnectionGate::wait_next(Connection c) {
  c.cut = HeadCut::none;
  if (head_end(c.pending) != std::string::npos) return dispatch_(std::move(c));  // pipelined
  const Clock::time_point now = Clock::now();
  const bool started = !c.pending.empty();
  const Clock::time_point until =
      std::min(c.request_deadline, now + (started ? o_.header_timeout : o_.keep_alive));
  put({std::move(c), started ? Phase::head : Phase::idle, until});
}

void ConnectionGate::finish(Connection c) {
  ::shutdown(c.sock, SHUT_WR);  // the answer is sent; the client sees the end of it
  put({std::move(c), Phase::linger, Clock::now() + kLingerTime});
}

void ConnectionGate::put(Waiting w) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      inbox_.push_back(std::move(w));
      (void)!::write(wake_[1], "x", 1);
      return;
    }
  }
  close(w.c);
}

void ConnectionGate::close(const Connection& c) {
  ::shutdown(c.sock, SHUT_RDWR);
  ::close(c.sock);
  if (c.peer.empty()) return;
  const std::lock_guard<std::mutex> lock(mu_);
  const auto it = open_.find(c.peer);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
}

// Reads what arrived on a waiting connection and moves it on: to a worker once its head is
// whole (or cut), closed once its client has gone or its time is up.
bool ConnectionGate::step(Waiting& w, short revents, Clock::time_point now) {
  if (revents != 0) {
    std::array<char, 16384> buf;
    for (int reads = 0; reads < 64; ++reads) {
      const ssize_t n = ::recv(w.c.sock, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      if (n <= 0) {
        close(w.c);  // the client closed (or reset) the connection
        return false;
      }
      if (w.phase == Phase::linger) {
        w.discarded += static_cast<size_t>(n);
        if (w.discarded > kLingerBytes) break;
        continue;
      }
      w.c.pending.append(buf.data(), static_cast<size_t>(n));
      if (w.phase == Phase::idle) {
        w.phase = Phase::head;
        w.until = std::min(w.c.request_deadline, now + o_.header_timeout);
      }
      if (head_end(w.c.pending) != std::string::npos || w.c.pending.size() > kMaxHeaderBytes) break;
    }
    if (w.phase == Phase::linger && w.discarded > kLingerBytes) {
      close(w.c);
      return false;
    }
    if (w.phase == Phase::head &&
        (head_end(w.c.pending) != std::string::npos || w.c.pending.size() > kMaxHeaderBytes)) {
      if (head_end(w.c.pending) == std::string::npos) w.c.cut = HeadCut::too_large;
      dispatch_(std::move(w.c));
      return false;
    }
  }
  if (now < w.until) return true;
  if (w.phase == Phase::head && !w.c.pending.empty()) {
    w.c.cut = HeadCut::timeout;  // a worker answers 408
    dispatch_(std::move(w.c));
  } else {
    close(w.c);  // an idle connection, nothing of a request, or the end of a linger
  }
  return false;
}

void ConnectionGate::loop() {
  std::vector<Waiting> waiting;
  std::vector<pollfd> fds;
  while (true) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      for (Waiting& w : inbox_) waiting.push_back(std::move(w));
      inbox_.clear();
    }
    Clock::time_point now = Clock::now();
    int64_t timeout = 1000;
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    for (const Waiting& w : waiting) {
      fds.push_back(pollfd{w.c.sock, POLLIN, 0});
      timeout = std::min(timeout, std::max<int64_t>(0, ms_until(w.until, now)));
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(timeout)) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      char drain[256];
      while (::read(wake_[0], drain, sizeof drain) > 0) {
      }
    }
    now = Clock::now();
    size_t kept = 0;
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (!step(waiting[i], fds[i + 1].revents, now)) continue;
      if (kept != i) waiting[kept] = std::move(waiting[i]);
      ++kept;
    }
    waiting.resize(kept);
  }
  std::vector<Waiting> left;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    left.swap(inbox_);
  }
  for (const Waiting& w : waiting) close(w.c);
  for (const Waiting& w : left) close(w.c);
}

}  // namespace ember::apps::serve
