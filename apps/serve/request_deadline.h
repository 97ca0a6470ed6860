// The httplib::Server of `ember serve` with a per-request deadline: the request
// line, headers and body must arrive within --request-timeout seconds of the
// connection's start (or of the previous response on a kept-alive connection),
// and the request line plus headers within kMaxHeaderBytes; a request cut short
// is answered 408 or 431 (nothing if its request line never came) and its
// connection closed. A running handler has no deadline.
#pragma once
#include <cstddef>
#include <memory>

namespace httplib {
class Server;
}

namespace ember::apps::serve {

constexpr size_t kMaxHeaderBytes = size_t{64} << 10;  // request line and headers together

// request_timeout_seconds > 0. The server binds with SO_REUSEADDR only (the library's default
// also sets SO_REUSEPORT, which would let a second server share the port unnoticed).
std::unique_ptr<httplib::Server> make_http_server(double request_timeout_seconds);

// A listen queue of `backlog` (the library listens with 5) on a bound make_http_server server.
void deepen_backlog(httplib::Server& server, int backlog);

// Why the reading of this worker thread's current request stopped early (for the error body).
enum class RequestCut { none, timeout, headers_too_large };
RequestCut request_cut();

}  // namespace ember::apps::serve
