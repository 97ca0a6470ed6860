// The httplib::Server of `ember serve` with its own connection handling: the
// connection gate (apps/serve/connection_gate.h) holds a connection until its
// request's head has arrived, within the header timeout and kMaxHeaderBytes;
// a worker then settles the body's framing (apps/serve/request_body.h) and lets
// the library read the rest within the request's deadline (--request-timeout
// from the connection's start or the previous response) and run the handler,
// which has no deadline. A request cut short is answered 408 or 431 (nothing if
// its request line never came), a refused one 400, 413 or 501, and its
// connection closed. An HTTP/1.0 request's connection is closed after its
// response (which says Connection: close), keep-alive asked for or not.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace ember::apps::serve {

constexpr size_t kMaxHeaderBytes = size_t{64} << 10;  // request line and headers together

struct HttpOptions {
  double request_timeout_seconds = 30;  // > 0
  double header_timeout_seconds = 10;   // > 0
  size_t max_body_bytes = size_t{4} << 20;
  int64_t max_connections_per_client = 0;         // 0: no limit
  size_t threads = 1;                             // workers
  const std::atomic<bool>* closing = nullptr;     // true: every response closes its connection
  std::function<void(int status)> count_refusal;  // answers written outside the library
};

// The server binds with SO_REUSEADDR only (the library's default also sets SO_REUSEPORT,
// which would let a second server share the port unnoticed).
std::unique_ptr<httplib::Server> make_http_server(const HttpOptions& options);

// A listen queue of `backlog` (the library listens with 5) on a bound make_http_server server.
void deepen_backlog(httplib::Server& server, int backlog);

// Why this worker thread's current request was not read whole, for its answer.
enum class RequestCut { none, timeout, headers_too_large, refused };
RequestCut request_cut();

struct Refusal {
  int status = 0;
  std::string code, message;
};
const Refusal& request_refusal();  // request_cut() == refused: the answer

// Whether the client of this worker thread's current request is still connected (false
// once it closed or reset the connection, or outside a request), for a handler that
// writes nothing for a while.
bool client_connected();

// Ends this worker thread's current connection at once, so that nothing more reaches its
// client (a handler whose client went away before its response began).
void drop_connection();

}  // namespace ember::apps::serve
