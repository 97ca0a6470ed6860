// The connection a worker of `ember serve` reads one request from (what the HTTP
// library's Stream forwards to, apps/serve/request_deadline.cpp): it first hands
// out bytes already read (a head the connection gate collected, or a head and
// body ember rewrote), then reads the socket, and its reads fail once the
// request's deadline passes (recording the timeout for the error body). Writes
// wait up to the write timeout and fail once the client has gone.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace ember::apps::serve {

class DeadlineStream {
 public:
  using Clock = std::chrono::steady_clock;
  // `timed_out` is set when a read fails at the deadline.
  DeadlineStream(int sock, Clock::time_point deadline, int64_t read_ms, int64_t write_ms,
                 std::string pending, bool& timed_out);

  bool is_readable() const;
  bool is_writable() const;
  ssize_t read(char* ptr, size_t size);
  ssize_t write(const char* ptr, size_t size);
  // The numeric address and port of the client (local false) or of this end.
  void ip_and_port(bool local, std::string& ip, int& port) const;
  int socket() const { return sock_; }

  // The bytes read and not yet handed out, taken away (the next request's, or for rewriting).
  std::string take_pending();
  // Hands out `bytes` before anything else still to come.
  void put_back(std::string bytes);

 private:
  int sock_;
  Clock::time_point deadline_;
  int64_t read_ms_, write_ms_;
  std::string pending_;
  size_t offset_ = 0;
  bool& timed_out_;
};

}  // namespace ember::apps::serve
