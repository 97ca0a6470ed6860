// GET /metrics: Prometheus text exposition (version 0.0.4), each family with
// its # HELP and # TYPE lines. The server counts HTTP responses by status and
// generations by finish reason; the engine gives tokens, running and waiting
// sequences, KV blocks, prefix-cache hits (in tokens), preemptions and the
// time-to-first-token and inter-token-latency histograms; ember_weights_info names the
// inference weights' type (--weights) in its label.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "inference/engine/engine.h"

namespace ember::apps::serve {

struct ServerCounts {
  std::map<int, uint64_t> responses;         // by HTTP status
  std::map<std::string, uint64_t> finished;  // by finish reason ("stop", "length", "cancelled")
};

// Thread-safe counters of the HTTP side.
class ServerMetrics {
 public:
  void count_response(int status);
  void count_finish(const std::string& reason);
  ServerCounts snapshot() const;

 private:
  mutable std::mutex mu_;
  ServerCounts counts_;
};

std::string prometheus_text(const inference::EngineStats& engine, const ServerCounts& server,
                            const std::string& weights = "float32");

}  // namespace ember::apps::serve
