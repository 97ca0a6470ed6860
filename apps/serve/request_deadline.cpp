// The connection handling of `ember serve`'s httplib::Server (apps/serve/request_deadline.h).
// The library's accept loop hands each connection to process_and_close_socket (a virtual
// of httplib 0.11.4), here only a hand-over to the connection gate; a worker then runs
// the library's process_request over a DeadlineStream for one request at a time.
#include "apps/serve/request_deadline.h"

#include <httplib.h>
#include <sys/socket.h>

#include "apps/serve/connection_gate.h"
#include "apps/serve/deadline_stream.h"
#include "apps/serve/request_body.h"

namespace ember::apps::serve {
namespace {

thread_local bool t_reads_stopped = false;  // set by the stream at the deadline
thread_local RequestCut t_cut = RequestCut::none;
thread_local Refusal t_refusal;
thread_local bool t_close = false;  // the response said Connection: close
thread_local const DeadlineStream* t_stream = nullptr;  // the current request's connection

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The library's Stream over a worker's DeadlineStream.
class RequestStream : public httplib::Stream {
 public:
  explicit RequestStream(DeadlineStream& s) : s_(s) {}
  bool is_readable() const override { return s_.is_readable(); }
  bool is_writable() const override { return s_.is_writable(); }
  ssize_t read(char* ptr, size_t size) override { return s_.read(ptr, size); }
  ssize_t write(const char* ptr, size_t size) override { return s_.write(ptr, size); }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    s_.ip_and_port(false, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    s_.ip_and_port(true, ip, port);
  }
  socket_t socket() const override { return s_.socket(); }

 private:
  DeadlineStream& s_;
};

// The listener's task queue (Server::new_task_queue): enqueue() runs the listener's job at
// once, and that job (process_and_close_socket) hands the connection to the gate, which hands
// it to a worker of the pool once a request's head is whole.
class GateQueue : public httplib::TaskQueue {
 public:
  GateQueue(const GateOptions& options, size_t workers, std::function<void(Connection)> serve)
      : workers_(workers), gate_(options, [this, serve](Connection c) {
          workers_.enqueue([serve, c] { serve(c); });
        }) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {
    gate_.shutdown();     // closes the connections waiting for a request
    workers_.shutdown();  // waits for the requests being answered
  }
  ConnectionGate& gate() { return gate_; }

 private:
  httplib::ThreadPool workers_;
  ConnectionGate gate_;
};

class DeadlineServer : public httplib::Server {
 public:
  explicit DeadlineServer(HttpOptions o) : o_(std::move(o)) {
    set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    // A request cut short or refused closes its connection (what is left of it cannot be
    // parsed), and so does every response once the server is shutting down, and every
    // response to HTTP/1.0 (a 1.0 connection persists only by an explicit keep-alive; not
    // keeping any is the simplest correct answer to it).
    set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (request_cut() != RequestCut::none || (o_.closing && *o_.closing) ||
          req.version == "HTTP/1.0") {
        res.headers.erase("Keep-Alive");
        res.headers.erase("Connection");
        res.set_header("Connection", "close");
      }
      t_close = res.get_header_value("Connection") == "close";
    });
    new_task_queue = [this] {
      GateOptions g;
      g.request_timeout = seconds(o_.request_timeout_seconds);
      g.header_timeout = seconds(o_.header_timeout_seconds);
      g.keep_alive = std::chrono::seconds(keep_alive_timeout_sec_);
      g.max_requests = keep_alive_max_count_;
      g.max_per_client = o_.max_connections_per_client;
      g.count_refusal = o_.count_refusal;
      auto* queue = new GateQueue(g, o_.threads, [this](Connection c) { serve(std::move(c)); });
      gate_ = &queue->gate();
      return queue;
    };
  }
  void deepen_backlog(int backlog) { ::listen(svr_sock_, backlog); }

 private:
  bool process_and_close_socket(socket_t sock) override {
    gate_->admit(sock);
    return true;
  }

  // One request of connection `c` (its head whole, or cut), on a worker thread.
  void serve(Connection c) {
    const int64_t read_ms = read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000;
    const int64_t write_ms = write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000;
    t_cut = c.cut == HeadCut::timeout     ? RequestCut::timeout
            : c.cut == HeadCut::too_large ? RequestCut::headers_too_large
                                          : RequestCut::none;
    t_reads_stopped = t_cut != RequestCut::none;  // the library reads the bytes there are
    t_refusal = {};
    t_close = false;
    DeadlineStream conn(c.sock, c.request_deadline, read_ms, write_ms, std::move(c.pending),
                        t_reads_stopped);
    RequestStream strm(conn);
    t_stream = &conn;
    bool ok = false, closed = false;
    if (t_cut == RequestCut::none) {
      const BodyOutcome body = settle_body(conn, o_.max_body_bytes);
      if (body.timed_out) t_cut = RequestCut::timeout;
      if (body.status != 0) {
        t_cut = RequestCut::refused;
        t_refusal = {body.status, body.code, body.message};
      }
      if (!body.client_gone) ok = process_request(strm, c.requests_left == 1, closed, nullptr);
    } else {
      ok = process_request(strm, true, closed, nullptr);
    }
    t_stream = nullptr;
    c.pending = conn.take_pending();
    const bool again =
        ok && !closed && !t_close && request_cut() == RequestCut::none && c.requests_left > 1;
    t_cut = RequestCut::none;
    t_reads_stopped = false;
    if (again) {
      --c.requests_left;
      c.request_deadline = Clock::now() + seconds(o_.request_timeout_seconds);
      gate_->wait_next(std::move(c));
    } else {
      gate_->finish(std::move(c));
    }
  }

  HttpOptions o_;
  ConnectionGate* gate_ = nullptr;  // in the listener's task queue, while it listens
};

}  // namespace

std::unique_ptr<httplib::Server> make_http_server(const HttpOptions& options) {
  return std::make_unique<DeadlineServer>(options);
}

void deepen_backlog(httplib::Server& server, int backlog) {
  static_cast<DeadlineServer&>(server).deepen_backlog(backlog);
}

RequestCut request_cut() {
  if (t_cut == RequestCut::none && t_reads_stopped) return RequestCut::timeout;
  return t_cut;
}

const Refusal& request_refusal() {
  return t_refusal;
}

bool client_connected() {
  return t_stream != nullptr && t_stream->is_writable();
}

void drop_connection() {
  if (t_stream) ::shutdown(t_stream->socket(), SHUT_RDWR);
}

}  // namespace ember::apps::serve
