// `ember serve`: an OpenAI-compatible HTTP server over a checkpoint, with
// continuous batching, a paged KV cache and prefix reuse (docs/cli.md#serving).
// The options are registered here; everything else is apps/serve/.
#include "apps/cli/commands.h"
#include "apps/cli/moved_base_option.h"
#include "apps/cli/weights_option.h"
#include "apps/serve/server.h"

namespace ember::apps {

CommandRunner add_serve_command(CLI::App& app) {
  auto o = std::make_shared<serve::ServeOptions>();
  CLI::App* sub =
      app.add_subcommand("serve", "Serve a checkpoint over HTTP in the form of the OpenAI API");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5): base, fine-tune or merged")
      ->required()
      ->check(CLI::ExistingFile);
  add_moved_base_option(*sub, o->moved_base);
  sub->add_option("--host", o->host,
                  "address to listen on (loopback by default; 0.0.0.0: every interface)");
  sub->add_option("--port", o->port, "TCP port (0: any free port, printed once listening)");
  sub->add_option("--api-key", o->api_key,
                  "require 'Authorization: Bearer KEY' on every /v1 route (default: no key)");
  sub->add_option(
      "--served-name", o->served_name,
      "the model's name in the API (default: the checkpoint's file stem; RUN/step_N.h5 gives "
      "RUN-step_N)");
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json to use instead of the checkpoint's")
      ->check(CLI::ExistingFile);
  sub->add_option("--max-seqs", o->max_seqs, "sequences in the running batch at most");
  auto* blocks = sub->add_option(
      "--kv-blocks", o->kv_blocks,
      "KV-cache blocks of 16 tokens (0: from --kv-memory, else enough for --max-seqs "
      "full contexts)");
  sub->add_option("--kv-memory", o->kv_memory,
                  "KV-cache memory, e.g. 2GiB or 512MiB (instead of --kv-blocks)")
      ->excludes(blocks);
  sub->add_option("--kv-cache-dtype", o->kv_cache_dtype,
                  "the KV cache's type: float32, or bfloat16 (half the memory per token and half "
                  "the bytes a decode step reads; keys and values rounded to nearest-even)")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  add_weights_option(sub, o->weights);
  sub->add_option("--max-queue", o->max_queue,
                  "requests waiting for a seat at most; past it: HTTP 429");
  sub->add_option("--max-batch-tokens", o->max_batch_tokens,
                  "tokens one engine step computes at most (decodes first, then prefill chunks)");
  sub->add_option("--max-prefill-with-decodes", o->max_prefill_with_decodes,
                  "prefill tokens at most in a step that also decodes (0: up to --max-batch-tokens); "
                  "smaller: a steadier inter-token latency, a slower first token under load");
  sub->add_option("--max-tokens-cap", o->max_tokens_cap,
                  "a request's max_tokens at most (0: the model's context length)");
  sub->add_option(
      "--threads", o->threads,
      "HTTP worker threads, one per request being read or answered (0: max-seqs + max-queue + "
      "8, at most 1024)");
  sub->add_option("--max-body-bytes", o->max_body_bytes, "largest request body; past it: HTTP 413");
  sub->add_option(
      "--request-timeout", o->request_timeout_seconds,
      "seconds a request's line, headers and body have to arrive (from the connection's "
      "start or the previous response; past it: HTTP 408 and the connection closed)");
  sub->add_option("--header-timeout", o->header_timeout_seconds,
                  "seconds a request's line and headers have to arrive (past it: HTTP 408 and "
                  "the connection closed)");
  sub->add_option("--max-connections-per-client", o->max_connections_per_client,
                  "open connections one client address may hold (past it: HTTP 503 and a "
                  "close; 0: no limit; behind a proxy every client has the proxy's address)");
  sub->add_option(
         "--shutdown-grace", o->shutdown_grace_seconds,
         "SIGTERM/SIGINT: seconds in-flight requests may still run before they are cancelled")
      ->check(CLI::Range(0.0, 8.0));
  sub->add_flag("--no-prefix-cache", o->no_prefix_cache,
                "do not reuse the KV blocks of earlier prompts");
  return [o]() { return serve::run_serve(*o); };
}

}  // namespace ember::apps
