// Streamed OpenAI-style requests through cpp-httplib: the body is read by a
// content receiver as it arrives (CompletionStream parses it), so each text
// chunk is timed when its bytes reach the client.
#include "apps/serve_bench/stream_request.h"

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"

namespace ember::apps {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

httplib::Headers request_headers(const ServerTarget& target) {
  httplib::Headers headers;
  if (!target.api_key.empty()) headers.emplace("Authorization", "Bearer " + target.api_key);
  return headers;
}

// httplib's error in words.
std::string describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect";
    case httplib::Error::ConnectionTimeout:
      return "the connection timed out";
    case httplib::Error::Read:
      return "reading the response failed (connection closed or --timeout passed)";
    case httplib::Error::Write:
      return "sending the request failed";
    default:
      return httplib::to_string(error);
  }
}

void set_timeouts(httplib::Client& client, const ServerTarget& target) {
  client.set_connection_timeout(10);
  client.set_read_timeout(target.timeout_s);
  client.set_write_timeout(30);
}

// "HTTP 429: <error.message>" (or the start of the body when it is not an OpenAI error).
std::string http_error(int status, const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string message = body.substr(0, 200);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    message = j["error"]["message"].get<std::string>();
  }
  return "HTTP " + std::to_string(status) + (message.empty() ? "" : ": " + message);
}

RequestRecord finish_record(RequestRecord r, const CompletionStream& stream, int status,
                            const std::string& error_body, httplib::Error error, bool dropped) {
  r.content_times = stream.content_times();
  r.output_tokens = stream.output_tokens();
  r.prompt_tokens = stream.prompt_tokens();
  r.outcome = RequestOutcome::Failed;
  if (dropped) {
    r.outcome = RequestOutcome::Dropped;
  } else if (stream.failed()) {
    r.error = stream.error();
  } else if (status != 0 && status != 200) {
    r.error = http_error(status, error_body);
  } else if (error != httplib::Error::Success) {
    r.error = "request failed: " + describe(error);
  } else if (!stream.done()) {
    r.error = "the stream ended without data: [DONE]";
  } else {
    r.outcome = RequestOutcome::Ok;
  }
  return r;
}

}  // namespace

ServerTarget parse_server_url(const std::string& url) {
  static const std::regex form(
      R"(^(https?://(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?)(/[^?#\s]*)?$)");
  std::smatch m;
  EMBER_CHECK(std::regex_match(url, m, form),
              "--url must look like http://HOST:PORT (optionally with a path "
              "before /v1), got '",
              url, "'");
  EMBER_CHECK(!m[2].matched || (std::stoi(m[2].str()) >= 1 && std::stoi(m[2].str()) <= 65535),
              "--url: the port must be between 1 and 65535, got '", url, "'");
  ServerTarget t;
  t.origin = m[1].str();
  t.path_prefix = m[3].str();
  while (!t.path_prefix.empty() && t.path_prefix.back() == '/') t.path_prefix.pop_back();
  if (t.path_prefix.size() >= 3 && t.path_prefix.compare(t.path_prefix.size() - 3, 3, "/v1") == 0) {
    t.path_prefix.resize(t.path_prefix.size() - 3);
  }
  return t;
}

std::string stream_request_body(const StreamRequest& request) {
  json body = {{"max_tokens", request.max_tokens},
               {"temperature", request.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!request.model.empty()) body["model"] = request.model;
  if (request.seed) body["seed"] = *request.seed;
  if (request.endpoint == ServeEndpoint::Chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", request.prompt}}});
  } else {
    body["prompt"] = request.prompt;
  }
  return body.dump();
}

RequestRecord run_stream_request(const ServerTarget& target, const StreamRequest& request) {
  httplib::Client client(target.origin);
  set_timeouts(client, target);
  httplib::Request req;
  req.method = "POST";
  req.path = target.path_prefix +
             (request.endpoint == ServeEndpoint::Chat ? "/v1/chat/completions" : "/v1/completions");
  req.headers = request_headers(target);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.body = stream_request_body(request);
  RequestRecord record;
  CompletionStream stream(request.endpoint);
  int status = 0;
  std::string error_body;
  bool dropped = false;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(data, n);
      return true;
    }
    stream.receive({data, n}, std::chrono::duration<double>(Clock::now() - record.sent).count());
    if (stream.failed()) return false;
    if (request.drop_after_chunks > 0 && !stream.done() &&
        stream.content_times().size() >= request.drop_after_chunks) {
      dropped = true;  // closing the connection is the client's choice
      return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  record.sent = Clock::now();
  client.send(req, res, error);
  record.ended = Clock::now();
  return finish_record(std::move(record), stream, status, error_body, error, dropped);
}

std::string first_served_model(const ServerTarget& target) {
  httplib::Client client(target.origin);
  set_timeouts(client, target);
  const std::string path = target.path_prefix + "/v1/models";
  const httplib::Result res = client.Get(path, request_headers(target));
  EMBER_CHECK(res, "cannot reach the server at ", target.origin, ": ", describe(res.error()));
  EMBER_CHECK(res->status == 200, "GET ", path, ": ", http_error(res->status, res->body));
  const json j = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  EMBER_CHECK(j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
                  j["data"][0].is_object() && j["data"][0].contains("id") &&
                  j["data"][0]["id"].is_string(),
              "GET ", path, " lists no model (give one with --model)");
  return j["data"][0]["id"].get<std::string>();
}

std::string served_weights(const ServerTarget& target) {
  httplib::Client client(target.origin);
  set_timeouts(client, target);
  const httplib::Result res = client.Get(target.path_prefix + "/v1/models", request_headers(target));
  if (!res || res->status != 200) return "";
  const json j = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) return "";
  const json& m = j["data"][0];
  return m.is_object() && m.contains("weights") && m["weights"].is_string() ? m["weights"].get<std::string>() : "";
}

}  // namespace ember::apps
