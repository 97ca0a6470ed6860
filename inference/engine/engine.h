// The batching engine behind `ember serve` (and `ember generate`): requests
// wait in a bounded queue, join the running batch when blocks allow, and every
// step runs one batched forward (inference/model_runner/paged_forward.h) that decodes one token of
// each running sequence and prefills chunks of waiting prompts under a token
// budget (continuous batching, vLLM's scheduler without separate phases).
// KV memory is paged (inference/kv_cache/block_manager.h): blocks of 16 tokens, reference
// counted, full blocks of earlier prompts reused by their token prefix. When
// blocks run out the newest running sequence is preempted (its blocks freed,
// recomputed later). Results never depend on the batch (batch invariance).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "inference/model_runner/paged_forward.h"
#include "inference/sample/sampler.h"

namespace ember::inference {

struct EngineOptions {
  int64_t max_seqs = 16;          // sequences in the running batch at most
  int64_t kv_blocks = 0;          // KV blocks; 0: kv_memory_bytes worth, or if that is 0 too,
                                  // enough for max_seqs full contexts
  size_t kv_memory_bytes = 0;
  int64_t max_batch_tokens = 256; // tokens one step computes at most (decodes first, then prefill chunks)
  int64_t max_prefill_with_decodes = 0;  // prefill tokens at most in a step that decodes (0: no cap)
  int64_t max_queue = 256;        // waiting requests at most: submit() past it throws QueueFull
  bool prefix_cache = true;       // reuse full blocks of earlier prompts
  DType kv_dtype = DType::Float32;  // the KV cache's: Float32, or BFloat16 (half the memory)
};

// A token's log-probability under the model (log-softmax of the raw logits, before
// temperature or filters) and, when asked, the most likely tokens at its position.
struct TokenLogprob {
  int64_t token = 0;
  double logprob = 0;                         // NaN for the prompt's first token (nothing before it)
  std::vector<std::pair<int64_t, double>> top; // most likely first; ties: lower id first
};

enum class FinishReason {
  Stop,       // a stop token was drawn (output only under EngineRequest::output_stop_token)
  Length,     // max_tokens generated, or the context (max_seq_len) is full
  Cancelled,  // RequestHandle::cancel, or the engine shut down
};
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled"

struct EngineRequest {
  std::vector<int64_t> prompt;       // at least one token, each < vocab_size
  SamplingOptions sampling;          // max_tokens (0: no output, e.g. to score the prompt),
                                     // temperature, top_k, top_p, seed (stop_token: see below)
  std::vector<int64_t> stop_tokens;  // drawing one ends the request (Stop); sampling.stop_token too
  int64_t logprobs = -1;             // -1: none; 0..5: each output token's logprob + this many top
  bool prompt_logprobs = false;      // score the prompt's tokens (echo); `logprobs` top ones each
  // Output logprobs of logits / sampling.temperature (the distribution drawn from when top-k,
  // top-p and the repetition penalty are off; RL's logp_old) instead of the raw logits.
  // Temperature 0 keeps the raw logits.
  bool logprobs_at_temperature = false;
  bool output_stop_token = false;    // a drawn stop token ends the output (and has its logprob)
  // The id (RequestHandle::id) of a request with the same prompt (parallel samples): admitted
  // while that one runs with its prompt computed, this one shares its KV blocks (the last
  // partial one copied) and computes only the prompt's last token. 0: none.
  int64_t share_prompt_with = 0;
};

// What a request produced since its previous event, in order.
struct EngineEvent {
  std::vector<int64_t> tokens;           // new output tokens
  std::vector<TokenLogprob> logprobs;    // one per new token when logprobs >= 0
  std::vector<TokenLogprob> prompt_logprobs;  // in the first event, when prompt_logprobs
  bool finished = false;
  FinishReason reason = FinishReason::Length;
  int64_t prompt_tokens = 0;         // prompt length and
  int64_t cached_prompt_tokens = 0;  // how many of them the prefix cache supplied (first event)
};

// The caller's side of a submitted request. Thread-safe.
class RequestHandle {
 public:
  // Waits up to `timeout` for output; returns everything that arrived since the last call
  // merged into one event, or nothing on timeout. After the finished event: nothing.
  std::optional<EngineEvent> next(std::chrono::milliseconds timeout);
  // Ends the request (a client went away): its blocks are freed at the next step and a
  // finished event with reason Cancelled follows (unless it finished first).
  void cancel();
  int64_t id() const { return id_; }

  // Engine side.
  RequestHandle(int64_t id) : id_(id) {}
  void push(EngineEvent ev);
  bool cancel_requested() const;

 private:
  struct State;
  int64_t id_;
  std::shared_ptr<State> state_ = make_state();
  static std::shared_ptr<State> make_state();
};

// submit() when max_queue requests already wait (HTTP 429).
class QueueFull : public Error {
 public:
  using Error::Error;
};

// Prometheus-style cumulative histogram: counts[i] = observations <= bounds[i];
// counts.back() (one more than bounds) is every observation.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  void observe(double x);
};

struct EngineStats {
  std::map<std::string, uint64_t> finished;  // by finish_reason_name
  uint64_t prompt_tokens = 0;       // prompt tokens of admitted requests
  uint64_t generation_tokens = 0;   // output tokens
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // in tokens
  uint64_t preemptions = 0, steps = 0;
  int64_t running = 0, waiting = 0;
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_free = 0;
  Histogram ttft_seconds;  // submit to first output token
  Histogram itl_seconds;   // between consecutive output tokens of a request
};

class Engine {
 public:
  Engine(std::shared_ptr<const InferenceModel> model, const EngineOptions& opt);
  ~Engine();  // shutdown(0)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws Error for a bad request (no prompt, a token outside the
  // vocabulary, prompt + max_tokens over max_seq_len, more blocks than the cache has,
  // logprobs > 5) and QueueFull past max_queue, or after shutdown began.
  std::shared_ptr<RequestHandle> submit(EngineRequest req);
  // Runs step() on a background thread whenever there is work.
  void start();
  // Takes no more requests, lets in-flight ones run for up to `grace`, cancels the rest
  // and stops the background thread.
  void shutdown(std::chrono::milliseconds grace);
  // One scheduling step on the caller's thread (only when start() was not called);
  // false when there was nothing to do.
  bool step();

  EngineStats stats() const;
  const EngineOptions& options() const;  // with kv_blocks resolved
  const nn::ModelConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::inference
