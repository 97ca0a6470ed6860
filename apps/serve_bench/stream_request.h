// The HTTP side of `ember bench-serve`: the server's address from --url, one
// streamed request to /v1/completions or /v1/chat/completions (stream true,
// stream_options.include_usage true) timed chunk by chunk, optionally closed
// by the client mid-stream, and the model the server lists first.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/serve_bench/completion_stream.h"

namespace ember::apps {

struct ServerTarget {
  std::string origin;       // "http://host:port" (or https)
  std::string path_prefix;  // "" or "/prefix" before /v1/... (no trailing slash)
  std::string api_key;      // sent as "Authorization: Bearer KEY" when not empty
  int timeout_s = 300;      // longest silence while reading a response
};

// "http://host[:port][/prefix]" (a trailing "/" or "/v1" is dropped); an Error naming --url
// otherwise.
ServerTarget parse_server_url(const std::string& url);

struct StreamRequest {
  ServeEndpoint endpoint = ServeEndpoint::Completions;
  std::string model;  // omitted from the body when empty
  std::string prompt;
  int64_t max_tokens = 128;
  double temperature = 0;
  std::optional<uint64_t> seed;
  size_t drop_after_chunks = 0;  // > 0: close the connection after this many text chunks
};

// The JSON body of the request.
std::string stream_request_body(const StreamRequest& request);

enum class RequestOutcome { Ok, Failed, Dropped };

struct RequestRecord {
  RequestOutcome outcome = RequestOutcome::Failed;
  std::string error;  // why it failed
  std::chrono::steady_clock::time_point sent, ended;
  std::vector<double> content_times;               // s after sending, of each chunk carrying text
  int64_t output_tokens = -1, prompt_tokens = -1;  // from the usage chunk (-1: none)
  double latency() const { return std::chrono::duration<double>(ended - sent).count(); }
};

// Sends the request and reads its stream to the end (or to the chosen drop).
RequestRecord run_stream_request(const ServerTarget& target, const StreamRequest& request);

// The first model id of GET /v1/models; an Error when the server cannot be reached or refuses.
std::string first_served_model(const ServerTarget& target);
// The "weights" field of the first model of GET /v1/models (`ember serve --weights`: float32,
// bf16 or int8); "" when the server does not say (another server) or cannot be asked.
std::string served_weights(const ServerTarget& target);

}  // namespace ember::apps
