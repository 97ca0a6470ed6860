// Where `ember serve`'s connections wait while they hold no request a worker could
// act on: one thread polls them all until a request's head (line and headers) has
// arrived whole, then hands the connection to a worker thread. A client that
// trickles its headers, or idles on a kept-alive connection, therefore costs a
// socket, never a worker. The gate also bounds the open connections of one client
// address (past it: 503 and a close), closes a head that takes longer than the
// header timeout (the worker answers 408 or 431), and discards what a client still
// sends after the answer that closes its connection, so that the answer (a 413 sent
// before the body was read) arrives instead of a reset.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ember::apps::serve {

using Clock = std::chrono::steady_clock;

// Why the head of a connection's request stopped arriving early.
enum class HeadCut { none, timeout, too_large };

struct Connection {
  int sock = -1;
  std::string peer;                    // the client's address ("" if unknown: not counted)
  std::string pending;                 // bytes read and not yet consumed (a head, perhaps more)
  Clock::time_point request_deadline;  // the request's line, headers and body all arrive by then
  size_t requests_left = 0;            // on this connection, this one included
  HeadCut cut = HeadCut::none;
};

struct GateOptions {
  Clock::duration request_timeout{}, header_timeout{}, keep_alive{};
  size_t max_requests = 100;                      // per connection
  int64_t max_per_client = 0;                     // open connections of one address; 0: no limit
  std::function<void(int status)> count_refusal;  // an answer the gate wrote itself
};

class ConnectionGate {
 public:
  // Hands a connection with a whole (or cut) head to a worker thread, which ends with
  // wait_next or finish.
  using Dispatch = std::function<void(Connection)>;
  ConnectionGate(GateOptions options, Dispatch dispatch);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // Closes every waiting connection and stops the thread; later arrivals are closed at once.
  void shutdown();

  void admit(int sock);          // a connection just accepted
  void wait_next(Connection c);  // after a response, for the next request on it
  void finish(Connection c);     // after the response that closes it: linger, then close

 private:
  struct Waiting;
  void loop();
  bool step(Waiting& w, short revents, Clock::time_point now);
  void close(const Connection& c);
  void put(Waiting w);

  GateOptions o_;
  Dispatch dispatch_;
  std::mutex mu_;
  std::vector<Waiting> inbox_;
  std::map<std::string, int64_t> open_;  // open connections per client address
  bool stopping_ = false;
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace ember::apps::serve
