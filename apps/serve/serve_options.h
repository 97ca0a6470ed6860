// The options of `ember serve` (apps/cli/cmd_serve.cpp registers them) and the
// pure decisions they lead to: the served model name, a memory size such as
// "2GiB", the engine's options and the number of HTTP worker threads.
#pragma once
#include <cstdint>
#include <string>

#include "inference/engine/engine.h"

namespace ember::apps::serve {

struct ServeOptions {
  std::string checkpoint, tokenizer;
  std::string moved_base;  // --base: a fine-tune's base moved since (apps/cli/moved_base_option.h)
  std::string host = "127.0.0.1";
  int port = 8000;          // 0: any free port (the line printed once listening names it)
  std::string api_key;      // "": no key needed
  std::string served_name;  // "": default_served_name(checkpoint)
  int64_t max_seqs = 16;
  int64_t kv_blocks = 0;  // 0: from kv_memory, else enough for max_seqs full contexts
  std::string kv_memory;  // e.g. "2GiB"; "": unset
  std::string kv_cache_dtype = "float32";  // or "bfloat16": half the memory per token
  std::string weights = "float32";  // --weights: float32, bf16 or int8 (core/kernels/packed_weights.h)
  int64_t max_queue = 256;
  int64_t max_batch_tokens = 256;
  int64_t max_prefill_with_decodes = 32;
  int64_t max_tokens_cap = 0;  // a request's max_tokens at most; 0: the context length
  int64_t threads = 0;         // HTTP worker threads; 0: max_seqs + max_queue + 8, at most 1024
  size_t max_body_bytes = size_t{4} << 20;
  int read_timeout_seconds = 5;         // a request's every read (headers and body)
  int write_timeout_seconds = 10;       // a response's every write (a client that stops reading)
  int keep_alive_seconds = 5;           // an idle connection is closed after this long
  double request_timeout_seconds = 30;  // a request's line, headers and body, all of them
  double header_timeout_seconds = 10;   // a request's line and headers
  int64_t max_connections_per_client = 64;  // open connections of one client address; 0: any
  double shutdown_grace_seconds = 5;        // SIGTERM: in-flight requests run this long at most
  bool no_prefix_cache = false;
};

// "2GiB", "512MiB", "1.5G", "1000000" (bytes); units K/M/G/T (powers of 1024), an optional
// "i" and "B", any case. An Error naming the option for anything else.
size_t parse_memory_size(const std::string& text, const std::string& option = "--kv-memory");

// The checkpoint's file stem ("fortunes.h5" -> "fortunes"); a training run's
// "RUN/step_00000200.h5" -> "RUN-step_00000200" (the run's folder name first).
std::string default_served_name(const std::string& checkpoint);

// Errors for values out of range, naming the option.
void check_serve_options(const ServeOptions& o);
inference::EngineOptions engine_options(const ServeOptions& o);
int64_t worker_threads(const ServeOptions& o);

}  // namespace ember::apps::serve
