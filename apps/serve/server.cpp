// The life of `ember serve` (apps/serve/server.h): model, engine, HTTP server
// with its limits (body size, read/write timeouts, keep-alive, header timeout and
// request deadline, connections per client), the signal wait and the bounded shutdown.
#include "apps/serve/server.h"

#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <future>
#include <memory>
#include <thread>

#include "apps/serve/request_deadline.h"
#include "apps/serve/routes.h"
#include "apps/serve/serve_state.h"
#include "apps/common/model_io.h"
#include "apps/common/stop_signals.h"
#include "core/error.h"
#include "core/kernels/packed_weights.h"

namespace ember::apps::serve {
namespace {

constexpr int kListenBacklog = 128;  // the library listens with 5; bursts of clients need more

HttpOptions http_options(const ServeOptions& o, ServeState& st) {
  HttpOptions h;
  h.request_timeout_seconds = o.request_timeout_seconds;
  h.header_timeout_seconds = o.header_timeout_seconds;
  h.max_body_bytes = o.max_body_bytes;
  h.max_connections_per_client = o.max_connections_per_client;
  h.threads = static_cast<size_t>(worker_threads(o));
  h.closing = &st.draining;
  h.count_refusal = [&st](int status) { st.metrics.count_response(status); };
  return h;
}

void configure(httplib::Server& http, const ServeOptions& o) {
  http.set_payload_max_length(o.max_body_bytes);
  http.set_read_timeout(o.read_timeout_seconds, 0);
  http.set_write_timeout(o.write_timeout_seconds, 0);
  http.set_keep_alive_timeout(o.keep_alive_seconds);
  http.set_keep_alive_max_count(100);
  http.set_tcp_nodelay(true);  // SSE chunks leave at once
}

std::string url_host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// Blocks until SIGTERM or SIGINT (taken by the signal thread, apps/common/stop_signals.h)
// or until the listener stops on its own; returns the signal, or 0.
int wait_for_stop(const std::atomic<int>& stop_signal, const std::future<bool>& listening) {
  while (true) {
    if (const int sig = stop_signal.load()) return sig;
    if (listening.wait_for(std::chrono::milliseconds(200)) == std::future_status::ready) {
      return stop_signal.load();
    }
  }
}

}  // namespace

int run_serve(const ServeOptions& o) {
  check_serve_options(o);
  // SIGTERM and SIGINT arrive only through wait_for_stop (never as a handler on an
  // engine, OpenMP or HTTP thread). A client gone mid-write is an error return
  // (EPIPE), never a SIGPIPE.
  static std::atomic<int> stop_signal;
  stop_signal = 0;
  const StopSignalScope stop_scope(stop_signal);
  std::signal(SIGPIPE, SIG_IGN);

  LoadedModel lm = load_model_for_text(o.checkpoint, o.tokenizer, o.moved_base);
  auto inference = std::make_shared<const inference::InferenceModel>(
      *lm.model, kernels::weight_type_named(o.weights));
  inference::Engine engine(inference, engine_options(o));
  ServeState st;
  st.model.name = o.served_name.empty() ? default_served_name(o.checkpoint) : o.served_name;
  st.model.created = static_cast<int64_t>(std::time(nullptr));
  st.model.tokenizer = &lm.tokenizer;
  st.model.max_seq_len = engine.config().max_seq_len;
  st.model.vocab_size = engine.config().vocab_size;
  st.model.max_tokens_cap = o.max_tokens_cap;
  st.model.kv_tokens = engine.options().kv_blocks * inference::kKVBlockSize;
  st.model.weights = o.weights;
  st.engine = &engine;
  st.api_key = o.api_key;

  const std::unique_ptr<httplib::Server> server = make_http_server(http_options(o, st));
  httplib::Server& http = *server;
  configure(http, o);
  add_routes(http, st, o.max_body_bytes);
  errno = 0;
  const int port = o.port == 0 ? http.bind_to_any_port(o.host)
                               : (http.bind_to_port(o.host, o.port) ? o.port : -1);
  const int bind_errno = errno;
  EMBER_CHECK(port > 0, "cannot listen on ", o.host, ":", o.port, ": ",
              bind_errno == EADDRINUSE
                  ? "the port is in use (another server?); --port 0 picks a free one"
              : bind_errno != 0 ? std::strerror(bind_errno)
                                : "--host is not an address of this machine");
  deepen_backlog(http, kListenBacklog);
  engine.start();
  std::promise<bool> listened;
  std::future<bool> listening = listened.get_future();
  std::thread listener([&] { listened.set_value(http.listen_after_bind()); });
  // httplib's stop() does nothing until the listener runs: a signal taken during loading
  // would otherwise stop nothing, and shutdown would wait out its deadline.
  while (!http.is_running() &&
         listening.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
  }
  std::printf("ember serve: listening on http://%s:%d (model %s)\n", url_host(o.host).c_str(), port,
              st.model.name.c_str());
  std::fflush(stdout);

  const int sig = wait_for_stop(stop_signal, listening);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(9);
  std::fprintf(stderr, "ember serve: %s, shutting down\n",
               sig == SIGINT ? "SIGINT"
               : sig         ? "SIGTERM"
                             : "the listener stopped");
  // While in-flight generations finish, the server still answers: /health and new
  // generations 503, each response closing its connection.
  st.draining = true;
  engine.shutdown(std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_grace_seconds * 1000)));
  http.stop();  // closes the listening socket; open connections end after their current request
  if (listening.wait_until(deadline) != std::future_status::ready) {
    // A client still holds a worker (a slow read within its timeout): do not wait for it.
    std::fprintf(stderr, "ember serve: stopped with connections still open\n");
    std::fflush(nullptr);
    std::_Exit(0);
  }
  listener.join();
  EMBER_CHECK(sig != 0, "the HTTP server on ", o.host, ":", port,
              " stopped listening unexpectedly");
  std::fprintf(stderr, "ember serve: stopped\n");
  return 0;
}

}  // namespace ember::apps::serve
