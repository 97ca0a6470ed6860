// Decisions taken from `ember serve`'s options (apps/serve/serve_options.h).
#include "apps/serve/serve_options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/kernels/packed_weights.h"

namespace ember::apps::serve {

size_t parse_memory_size(const std::string& text, const std::string& option) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  std::string unit = text.substr(i);
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  for (const auto& [letter, s] :
       {std::pair{'K', 0x1p10}, {'M', 0x1p20}, {'G', 0x1p30}, {'T', 0x1p40}}) {
    if (!unit.empty() && unit[0] == letter &&
        (unit.size() == 1 || unit.substr(1) == "B" || unit.substr(1) == "I" ||
         unit.substr(1) == "IB")) {
      scale = s;
    }
  }
  double value = -1;
  try {
    size_t used = 0;
    if (i > 0) value = std::stod(text.substr(0, i), &used);
    if (used != i) value = -1;
  } catch (const std::exception&) {
    value = -1;
  }
  EMBER_CHECK(scale > 0 && value > 0 && std::isfinite(value * scale) && value * scale < 0x1p62,
              option, ": '", text,
              "' is not a memory size (e.g. 2GiB, 512MiB, 1.5G or a number of bytes)");
  return static_cast<size_t>(value * scale);
}

std::string default_served_name(const std::string& checkpoint) {
  const std::filesystem::path path(checkpoint);
  const std::string stem = path.stem().string();
  const bool run_step =
      stem.size() > 5 && stem.rfind("step_", 0) == 0 &&
      std::all_of(stem.begin() + 5, stem.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!run_step) return stem;
  const std::string run = std::filesystem::absolute(path).parent_path().filename().string();
  return run.empty() ? stem : run + "-" + stem;
}

void check_serve_options(const ServeOptions& o) {
  EMBER_CHECK(o.port >= 0 && o.port <= 65535, "--port must be between 0 and 65535, got ", o.port);
  EMBER_CHECK(o.max_seqs > 0, "--max-seqs must be positive, got ", o.max_seqs);
  EMBER_CHECK(
      o.max_queue >= 1,
      "--max-queue must be >= 1 (a request waits at least until the next engine step), got ",
      o.max_queue);
  EMBER_CHECK(o.max_batch_tokens > 0, "--max-batch-tokens must be positive, got ",
              o.max_batch_tokens);
  EMBER_CHECK(o.max_prefill_with_decodes >= 0, "--max-prefill-with-decodes must be >= 0, got ",
              o.max_prefill_with_decodes);
  EMBER_CHECK(o.kv_blocks >= 0, "--kv-blocks must be >= 0, got ", o.kv_blocks);
  EMBER_CHECK(o.kv_blocks == 0 || o.kv_memory.empty(), "give --kv-blocks or --kv-memory, not both");
  EMBER_CHECK(o.max_tokens_cap >= 0, "--max-tokens-cap must be >= 0, got ", o.max_tokens_cap);
  EMBER_CHECK(o.threads >= 0 && o.threads <= 4096, "--threads must be between 0 and 4096, got ",
              o.threads);
  EMBER_CHECK(o.request_timeout_seconds > 0 && o.request_timeout_seconds <= 86400,
              "--request-timeout must be between 0 (excluded) and 86400 seconds, got ",
              o.request_timeout_seconds);
  EMBER_CHECK(o.header_timeout_seconds > 0 && o.header_timeout_seconds <= 86400,
              "--header-timeout must be between 0 (excluded) and 86400 seconds, got ",
              o.header_timeout_seconds);
  EMBER_CHECK(o.max_connections_per_client >= 0,
              "--max-connections-per-client must be >= 0 (0: no limit), got ",
              o.max_connections_per_client);
  if (!o.kv_memory.empty()) parse_memory_size(o.kv_memory);
  EMBER_CHECK(o.kv_cache_dtype == "float32" || o.kv_cache_dtype == "bfloat16",
              "--kv-cache-dtype must be float32 or bfloat16, got '", o.kv_cache_dtype, "'");
  kernels::weight_type_named(o.weights);  // float32, bf16 or int8
  if (!o.served_name.empty()) {
    EMBER_CHECK(std::none_of(o.served_name.begin(), o.served_name.end(),
                             [](unsigned char c) { return std::iscntrl(c); }),
                "--served-name must not hold control characters");
  }
}

inference::EngineOptions engine_options(const ServeOptions& o) {
  inference::EngineOptions e;
  e.max_seqs = o.max_seqs;
  e.kv_blocks = o.kv_blocks;
  e.kv_memory_bytes = o.kv_memory.empty() ? 0 : parse_memory_size(o.kv_memory);
  e.max_batch_tokens = o.max_batch_tokens;
  e.max_prefill_with_decodes = o.max_prefill_with_decodes;
  e.max_queue = o.max_queue;
  e.prefix_cache = !o.no_prefix_cache;
  e.kv_dtype = inference::kv_cache_dtype_named(o.kv_cache_dtype);
  return e;
}

int64_t worker_threads(const ServeOptions& o) {
  if (o.threads > 0) return o.threads;
  return std::min<int64_t>(o.max_seqs + o.max_queue + 8, 1024);
}

}  // namespace ember::apps::serve
