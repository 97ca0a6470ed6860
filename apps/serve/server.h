// `ember serve`: loads a checkpoint (base, fine-tune or merged), starts the
// batching engine (inference/engine/engine.h) and the HTTP server, prints
// "ember serve: listening on http://HOST:PORT (model NAME)" once it listens,
// and runs until SIGTERM or SIGINT: then it takes no new generation (503, and
// /health 503) while in-flight requests finish for the grace period, cancels the
// rest, closes the listening socket and returns 0 (within 10 s with the default
// 5 s grace).
#pragma once
#include "apps/serve/serve_options.h"

namespace ember::apps::serve {

int run_serve(const ServeOptions& options);

}  // namespace ember::apps::serve
