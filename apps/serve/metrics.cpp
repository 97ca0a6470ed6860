// Prometheus text of the server's and the engine's counters (apps/serve/metrics.h).
#include "apps/serve/metrics.h"

#include <charconv>

namespace ember::apps::serve {
namespace {

std::string number(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

class Exposition {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, const std::string& value) {
    text_ += name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
  }
  void scalar(const std::string& name, const char* type, const char* help, uint64_t value) {
    family(name, type, help);
    sample(name, "", std::to_string(value));
  }
  void histogram(const std::string& name, const char* help, const inference::Histogram& h) {
    family(name, "histogram", help);
    const uint64_t count = h.counts.empty() ? 0 : h.counts.back();
    for (size_t i = 0; i < h.bounds.size() && i < h.counts.size(); ++i) {
      sample(name + "_bucket", "le=\"" + number(h.bounds[i]) + "\"", std::to_string(h.counts[i]));
    }
    sample(name + "_bucket", "le=\"+Inf\"", std::to_string(count));
    sample(name + "_sum", "", number(h.sum));
    sample(name + "_count", "", std::to_string(count));
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

uint64_t unsigned_of(int64_t x) {
  return x > 0 ? static_cast<uint64_t>(x) : 0;
}

}  // namespace

void ServerMetrics::count_response(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.responses[status];
}

void ServerMetrics::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.finished[reason];
}

ServerCounts ServerMetrics::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::string prometheus_text(const inference::EngineStats& e, const ServerCounts& s,
                            const std::string& weights) {
  Exposition x;
  x.family("ember_weights_info", "gauge", "The inference weights' type (--weights): float32, bf16 or int8.");
  x.sample("ember_weights_info", "weights=\"" + weights + "\"", "1");
  x.family("ember_requests_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, n] : s.responses)
    x.sample("ember_requests_total", "status=\"" + std::to_string(status) + "\"",
             std::to_string(n));
  x.family(
      "ember_requests_finished_total", "counter",
      "Generations by finish reason (cancelled: the client went away or the server shut down).");
  for (const auto& [reason, n] : s.finished)
    x.sample("ember_requests_finished_total", "reason=\"" + reason + "\"", std::to_string(n));
  x.scalar("ember_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
           e.prompt_tokens);
  x.scalar("ember_generation_tokens_total", "counter", "Generated tokens.", e.generation_tokens);
  x.scalar("ember_requests_running", "gauge", "Sequences in the running batch.",
           unsigned_of(e.running));
  x.scalar("ember_requests_waiting", "gauge", "Requests waiting for a seat or KV blocks.",
           unsigned_of(e.waiting));
  x.scalar("ember_kv_blocks_total", "gauge", "KV-cache blocks (16 tokens each).",
           unsigned_of(e.kv_blocks_total));
  x.scalar("ember_kv_blocks_used", "gauge", "KV-cache blocks held by sequences.",
           unsigned_of(e.kv_blocks_used));
  x.scalar("ember_kv_blocks_free", "gauge", "KV-cache blocks free (cached prefixes included).",
           unsigned_of(e.kv_blocks_free));
  x.scalar("ember_prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the prefix cache.", e.prefix_cache_queries);
  x.scalar("ember_prefix_cache_hits_total", "counter", "Prompt tokens the prefix cache supplied.",
           e.prefix_cache_hits);
  x.scalar("ember_preemptions_total", "counter", "Sequences preempted when KV blocks ran out.",
           e.preemptions);
  x.scalar("ember_engine_steps_total", "counter", "Engine steps (batched forward passes).",
           e.steps);
  x.histogram("ember_time_to_first_token_seconds",
              "Time from submission to the first output token.", e.ttft_seconds);
  x.histogram("ember_inter_token_latency_seconds",
              "Time between consecutive output tokens of a request.", e.itl_seconds);
  return x.take();
}

}  // namespace ember::apps::serve
