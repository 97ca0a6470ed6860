// The figures of one concurrency level, as benchmark_serving computes them,
// from the records of its requests (only requests that ended well count):
// TTFT = first text chunk - send; ITL = the gaps between consecutive text
// chunks (all requests pooled); TPOT = (E2E - TTFT) / (output tokens - 1)
// for requests of 2+ tokens (output tokens from the usage chunk, else the
// text chunks); E2E = end of the stream - send; req/s and output tok/s over
// the level's wall time. Printed as one table row or one JSON object.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/serve_bench/load_generator.h"
#include "apps/serve_bench/percentiles.h"

namespace ember::apps {

struct LevelReport {
  int concurrency = 0;
  int64_t ok = 0, failed = 0, dropped = 0;
  double duration_s = 0, request_throughput = 0, output_throughput = 0;
  int64_t output_tokens = 0, prompt_tokens = 0;  // totals over the requests that ended well
  SampleSummary ttft_ms, tpot_ms, itl_ms, e2e_ms;
  std::string first_error;  // of the first failed request ("" when none failed)
};

LevelReport level_report(int concurrency, const LevelRun& run);

nlohmann::json level_report_json(const LevelReport& r);

// The two header lines of the table, and one level's row (no trailing newline).
std::string level_table_header();
std::string level_table_row(const LevelReport& r);

}  // namespace ember::apps
