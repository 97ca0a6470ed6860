// level_report: benchmark_serving's metrics from request records (level_report.h).
#include "apps/serve_bench/level_report.h"

#include <cstdio>

namespace ember::apps {

namespace {

using nlohmann::json;

struct Samples {
  std::vector<double> ttft, tpot, itl, e2e;  // ms
};

// Adds one request that ended well to the totals and samples.
void add_request(const RequestRecord& r, LevelReport& report, Samples& s) {
  const std::vector<double>& t = r.content_times;
  const int64_t tokens = r.output_tokens >= 0 ? r.output_tokens : static_cast<int64_t>(t.size());
  report.output_tokens += tokens;
  report.prompt_tokens += std::max<int64_t>(r.prompt_tokens, 0);
  const double e2e = r.latency() * 1e3;
  s.e2e.push_back(e2e);
  if (t.empty()) return;
  const double ttft = t.front() * 1e3;
  s.ttft.push_back(ttft);
  for (size_t i = 1; i < t.size(); ++i) s.itl.push_back((t[i] - t[i - 1]) * 1e3);
  if (tokens > 1) s.tpot.push_back((e2e - ttft) / static_cast<double>(tokens - 1));
}

json summary_json(const SampleSummary& s) {
  if (s.count == 0)
    return {{"count", 0}, {"mean", nullptr}, {"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}};
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}};
}

std::string summary_cells(const SampleSummary& s) {
  char buf[96];
  if (s.count == 0) {
    std::snprintf(buf, sizeof buf, " |%8s%8s%8s%8s", "-", "-", "-", "-");
  } else {
    std::snprintf(buf, sizeof buf, " |%8.1f%8.1f%8.1f%8.1f", s.mean, s.p50, s.p90, s.p99);
  }
  return buf;
}

}  // namespace

LevelReport level_report(int concurrency, const LevelRun& run) {
  LevelReport report;
  report.concurrency = concurrency;
  report.duration_s = run.wall_seconds;
  Samples s;
  for (const RequestRecord& r : run.records) {
    if (r.outcome == RequestOutcome::Dropped) {
      ++report.dropped;
    } else if (r.outcome == RequestOutcome::Failed) {
      if (report.failed++ == 0) report.first_error = r.error;
    } else {
      ++report.ok;
      add_request(r, report, s);
    }
  }
  if (run.wall_seconds > 0) {
    report.request_throughput = static_cast<double>(report.ok) / run.wall_seconds;
    report.output_throughput = static_cast<double>(report.output_tokens) / run.wall_seconds;
  }
  report.ttft_ms = summarize(s.ttft);
  report.tpot_ms = summarize(s.tpot);
  report.itl_ms = summarize(s.itl);
  report.e2e_ms = summarize(s.e2e);
  return report;
}

json level_report_json(const LevelReport& r) {
  json j = {{"concurrency", r.concurrency},
            {"ok", r.ok},
            {"failed", r.failed},
            {"dropped", r.dropped},
            {"duration_s", r.duration_s},
            {"request_throughput", r.request_throughput},
            {"output_throughput", r.output_throughput},
            {"total_output_tokens", r.output_tokens},
            {"total_prompt_tokens", r.prompt_tokens},
            {"ttft_ms", summary_json(r.ttft_ms)},
            {"tpot_ms", summary_json(r.tpot_ms)},
            {"itl_ms", summary_json(r.itl_ms)},
            {"e2e_ms", summary_json(r.e2e_ms)},
            {"first_error", r.failed > 0 ? json(r.first_error) : json(nullptr)}};
  return j;
}

constexpr const char* kHeadFormat = "%5s %6s %6s %7s %7s %6s %9s";

std::string level_table_header() {
  char head[128];
  std::snprintf(head, sizeof head, kHeadFormat, "conc", "ok", "failed", "dropped", "time s",
                "req/s", "out tok/s");
  std::string line1(std::string(head).size(), ' '), line2 = head;
  for (const char* group : {"TTFT ms", "TPOT ms", "ITL ms", "E2E ms"}) {
    char cell[64];
    std::snprintf(cell, sizeof cell, " |  %-30s", group);
    line1 += cell;
    line2 += " |    mean     p50     p90     p99";
  }
  line1.erase(line1.find_last_not_of(' ') + 1);
  return line1 + "\n" + line2;
}

std::string level_table_row(const LevelReport& r) {
  char head[128];
  std::snprintf(head, sizeof head, "%5d %6lld %6lld %7lld %7.1f %6.2f %9.1f", r.concurrency,
                static_cast<long long>(r.ok), static_cast<long long>(r.failed),
                static_cast<long long>(r.dropped), r.duration_s, r.request_throughput,
                r.output_throughput);
  return head + summary_cells(r.ttft_ms) + summary_cells(r.tpot_ms) + summary_cells(r.itl_ms) +
         summary_cells(r.e2e_ms);
}

}  // namespace ember::apps
