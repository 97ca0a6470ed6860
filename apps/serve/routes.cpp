// Route handlers of `ember serve` (apps/serve/routes.h). Generations answer
// through a chunked content provider that runs on the connection's worker
// thread until the output is complete (apps/serve/generation_run.h); to an
// HTTP/1.0 client, which reads no chunked coding, a stream is close-delimited
// and a whole response is generated first and sent with a Content-Length.
#include "apps/serve/routes.h"

#include <httplib.h>

#include <ctime>
#include <optional>
#include <random>

#include "apps/serve/api_error.h"
#include "apps/serve/auth.h"
#include "apps/serve/generation_run.h"
#include "apps/serve/request_deadline.h"
#include "apps/serve/request_plan.h"
#include "apps/serve/serve_state.h"

namespace ember::apps::serve {
namespace {

constexpr const char* kJson = "application/json";

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(json_text(error_json(e)), kJson);
}

// A handler whose ApiError (or any other exception) becomes an OpenAI error body.
template <class F>
httplib::Server::Handler guarded(F f) {
  return [f](const httplib::Request& req, httplib::Response& res) {
    try {
      f(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res,
                 ApiError(500, std::string("internal error: ") + e.what(), "", "internal_error"));
    }
  };
}

void require_key(const httplib::Request& req, const ServeState& st) {
  if (authorized(req.get_header_value("Authorization"), st.api_key)) return;
  throw ApiError(401,
                 req.has_header("Authorization")
                     ? "Incorrect API key provided"
                     : "Missing API key: send the header 'Authorization: Bearer KEY'",
                 "", "invalid_api_key");
}

void require_model(const std::string& name, const ServeState& st) {
  if (name == st.model.name) return;
  throw ApiError(
      404, "The model '" + name + "' does not exist (this server serves '" + st.model.name + "')",
      "model", "model_not_found");
}

ApiError shutting_down() {
  return ApiError(503, "the server is shutting down", "", "shutting_down");
}

uint64_t random_seed() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen();
}

std::shared_ptr<inference::RequestHandle> submit(ServeState& st, inference::EngineRequest req) {
  try {
    return st.engine->submit(std::move(req));
  } catch (const inference::QueueFull& e) {
    if (st.draining) throw shutting_down();
    throw ApiError(429, std::string("the server is busy (") + e.what() + "); retry later", "",
                   "queue_full");
  } catch (const Error& e) {
    // What the plan did not already refuse (request_plan.h), without the engine's prefix.
    const std::string what = e.what();
    throw bad_request(what.rfind("engine: ", 0) == 0 ? what.substr(8) : what);
  }
}

void generation(const httplib::Request& req, httplib::Response& res, ServeState& st,
                Endpoint endpoint) {
  require_key(req, st);
  const ApiRequest r = parse_request(req.body, endpoint);
  if (r.model) require_model(*r.model, st);
  if (st.draining) throw shutting_down();
  PlannedRequest plan = plan_request(r, st.model, random_seed());
  std::shared_ptr<inference::RequestHandle> handle = submit(st, std::move(plan.engine));
  const ResponseMeta meta{endpoint, response_id(endpoint, st.next_id++),
                          static_cast<int64_t>(std::time(nullptr)), st.model.name};
  auto run =
      std::make_shared<GenerationRun>(handle, r, plan.echo_text, plan.prompt_tokens, meta, st);
  const bool http10 = req.version == "HTTP/1.0";
  if (http10 && !r.stream) {
    const std::optional<GenerationRun::WholeBody> body = run->whole_body(client_connected);
    if (!body) return drop_connection();  // the client went away: nothing is sent
    res.status = body->status;
    res.set_content(body->json, kJson);
    return;
  }
  auto provider = [run, stream = r.stream](size_t, httplib::DataSink& sink) {
    const GenerationRun::Writer write = [&sink](const std::string& s) {
      return sink.is_writable() && sink.write(s.data(), s.size());
    };
    bool ok = false;
    try {
      ok = stream ? run->stream(write) : run->whole(write);
    } catch (const std::exception&) {
      ok = false;  // nothing escapes into the HTTP library's worker thread
    }
    if (ok) sink.done();
    return ok;
  };
  if (r.stream) res.set_header("Cache-Control", "no-cache");
  const char* type = r.stream ? "text/event-stream" : kJson;
  if (http10) {
    res.set_content_provider(type, provider);  // no length: the connection's close ends it
  } else {
    res.set_chunked_content_provider(type, provider);
  }
}

// The methods a known path takes (for 405), or nullptr for an unknown path.
const char* allowed_methods(const std::string& path) {
  if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
  if (path == "/health" || path == "/metrics" || path == "/v1/models" ||
      path.rfind("/v1/models/", 0) == 0) {
    return "GET, HEAD";
  }
  return nullptr;
}

bool method_allowed(const std::string& method, const char* allowed) {
  return std::string(allowed) == "POST" ? method == "POST" : method == "GET" || method == "HEAD";
}

// The answer to a request that was not read whole (request_deadline.h), if it was not.
std::optional<ApiError> cut_error() {
  switch (request_cut()) {
    case RequestCut::none:
      return std::nullopt;
    case RequestCut::timeout:
      return ApiError(408,
                      "the request did not arrive in time: its request line and headers must "
                      "arrive within the server's header timeout (ember serve --header-timeout), "
                      "and with its body within the request timeout (--request-timeout)",
                      "", "request_timeout");
    case RequestCut::headers_too_large:
      return ApiError(431,
                      "the request line and headers are larger than this server's limit of " +
                          std::to_string(kMaxHeaderBytes) + " bytes",
                      "", "headers_too_large");
    case RequestCut::refused:
      break;
  }
  const Refusal& r = request_refusal();
  return ApiError(r.status, r.message, "", r.code);
}

// The body of an error the HTTP library answered by itself (no route matched, a body over
// the limit, a malformed request).
ApiError library_error(const httplib::Request& req, httplib::Response& res, size_t max_body_bytes) {
  if (const std::optional<ApiError> cut = cut_error()) {
    res.status = cut->status();
    return *cut;
  }
  if (res.status == 413) {
    // The library caps form-encoded bodies (curl -d without a Content-Type) at 8192 bytes.
    if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0) {
      return ApiError(413,
                      "a form-encoded request body holds at most 8192 bytes: send the JSON with "
                      "'Content-Type: application/json'",
                      "", "request_too_large");
    }
    return ApiError(413,
                    "the request body is larger than this server's limit of " +
                        std::to_string(max_body_bytes) + " bytes",
                    "", "request_too_large");
  }
  if ((res.status == 404 || res.status == 400) && !req.path.empty()) {
    const char* allow = allowed_methods(req.path);
    if (!allow) {
      res.status = 404;
      return ApiError(404, "Unknown request URL: " + req.method + " " + req.path, "",
                      "unknown_url");
    }
    if (!method_allowed(req.method, allow)) {
      res.status = 405;
      res.set_header("Allow", allow);
      return ApiError(
          405,
          "method " + req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")",
          "", "method_not_allowed");
    }
  }
  return ApiError(
      res.status,
      "the HTTP request could not be handled (status " + std::to_string(res.status) + ")", "",
      "http_error");
}

void add_error_handlers(httplib::Server& http, size_t max_body_bytes) {
  const httplib::Server::HandlerWithResponse on_error =
      [max_body_bytes](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty())
          return httplib::Server::HandlerResponse::Unhandled;  // our own error body
        const ApiError e = library_error(req, res, max_body_bytes);
        res.set_content(json_text(error_json(e)), kJson);
        return httplib::Server::HandlerResponse::Handled;
      };
  http.set_error_handler(on_error);
  // A request whose head came whole but whose body was refused or cut short is answered
  // before any route sees it.
  http.set_pre_routing_handler([](const httplib::Request&, httplib::Response& res) {
    const std::optional<ApiError> cut = cut_error();
    if (!cut) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, *cut);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_error(res, ApiError(500, "internal error", "", "internal_error"));
      });
}

}  // namespace

void add_routes(httplib::Server& http, ServeState& st, size_t max_body_bytes) {
  http.Get("/health", guarded([&st](const httplib::Request&, httplib::Response& res) {
             if (st.draining) throw shutting_down();
             res.set_content("{\"status\":\"ok\"}", kJson);
           }));
  http.Get("/v1/models", guarded([&st](const httplib::Request& req, httplib::Response& res) {
             require_key(req, st);
             res.set_content(json_text(model_list_json(st.model.name, st.model.created, st.model.weights)), kJson);
           }));
  http.Get(R"(/v1/models/(.+))",
           guarded([&st](const httplib::Request& req, httplib::Response& res) {
             require_key(req, st);
             require_model(req.matches[1].str(), st);
             res.set_content(json_text(model_json(st.model.name, st.model.created, st.model.weights)), kJson);
           }));
  http.Post("/v1/completions", guarded([&st](const httplib::Request& req, httplib::Response& res) {
              generation(req, res, st, Endpoint::Completions);
            }));
  http.Post("/v1/chat/completions",
            guarded([&st](const httplib::Request& req, httplib::Response& res) {
              generation(req, res, st, Endpoint::Chat);
            }));
  http.Get("/metrics", guarded([&st](const httplib::Request&, httplib::Response& res) {
             res.set_content(prometheus_text(st.engine->stats(), st.metrics.snapshot(), st.model.weights),
                             "text/plain; version=0.0.4; charset=utf-8");
           }));
  http.set_logger([&st](const httplib::Request&, const httplib::Response& res) {
    st.metrics.count_response(res.status);
  });
  add_error_handlers(http, max_body_bytes);
}

}  // namespace ember::apps::serve
