// The routes of `ember serve` (docs/cli.md#serving): GET /health, GET /v1/models,
// GET /v1/models/{id}, POST /v1/completions, POST /v1/chat/completions, GET
// /metrics; every other path is a 404 (a known path with the wrong method a 405),
// every error an OpenAI error body. No route reads a file.
#pragma once
#include <cstddef>

namespace httplib {
class Server;
}

namespace ember::apps::serve {

struct ServeState;

// max_body_bytes: the limit the server was given (named in the 413 message).
void add_routes(httplib::Server& http, ServeState& state, size_t max_body_bytes);

}  // namespace ember::apps::serve
