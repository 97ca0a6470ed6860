// The load of one concurrency level: `concurrency` client threads, each
// sending one request at a time. Closed loop (rate infinite): a client sends
// its next request as soon as its last one ends. Open loop: a scheduler thread
// releases requests at fixed (1 / rate apart) or Poisson (exponential gaps of
// mean 1 / rate) arrival times, and a free client takes each (a request waits
// when all clients are busy). The level ends after `requests` requests, or in
// a soak (duration_s > 0) once no request starts after duration_s seconds.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "apps/serve_bench/stream_request.h"

namespace ember::apps {

struct LoadPlan {
  int concurrency = 1;
  int64_t requests = 1;                                   // used when duration_s == 0
  double duration_s = 0;                                  // > 0: a soak of this length
  double rate = std::numeric_limits<double>::infinity();  // requests/s; infinite: closed loop
  bool poisson = false;  // open loop: exponential gaps (else fixed ones)
  uint64_t seed = 0;     // of the Poisson gaps
};

struct LevelRun {
  std::vector<RequestRecord> records;  // in the order they were sent
  double wall_seconds = 0;             // from the level's start to the end of its last request
};

// Runs request `index` (0, 1, 2, ...) and returns its record; called from several threads at once.
using RequestRunner = std::function<RequestRecord(uint64_t index)>;
// Called about every progress_interval while the level runs, with the records so far' counts.
using ProgressReport =
    std::function<void(double elapsed_s, int64_t ok, int64_t failed, int64_t dropped)>;

LevelRun run_load(const LoadPlan& plan, const RequestRunner& run_one,
                  const ProgressReport& progress = nullptr,
                  std::chrono::milliseconds progress_interval = std::chrono::seconds(30));

}  // namespace ember::apps
