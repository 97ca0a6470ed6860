// What every route of `ember serve` shares: the served model, the engine, the
// counters behind /metrics, the API key and whether the server is shutting down.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "apps/serve/metrics.h"
#include "apps/serve/request_plan.h"
#include "inference/engine/engine.h"

namespace ember::apps::serve {

struct ServeState {
  ServedModel model;
  inference::Engine* engine = nullptr;
  ServerMetrics metrics;
  std::string api_key;                // "": none needed
  std::atomic<bool> draining{false};  // SIGTERM: new generations get 503
  std::atomic<uint64_t> next_id{1};
  // A response that wrote nothing for this long writes a keep-alive (a space before a
  // JSON body; an SSE comment line in a stream, twice as far apart): the write fails
  // once the client is gone, and its request is cancelled.
  std::chrono::milliseconds keep_alive_interval{1000};
};

}  // namespace ember::apps::serve
