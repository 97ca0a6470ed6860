// Continuous batching without separate phases (vLLM's scheduler): each step,
// every running sequence first gets its one decode token, then partially
// prefilled and waiting sequences get prefill chunks until the token budget is
// spent (at most max_prefill_with_decodes of them beside decodes). A waiting
// sequence joins when a seat (max_seqs) and blocks for all its tokens are free (after prefix-cache hits); a decode that finds no block
// preempts the newest running sequence (blocks freed, requeued at the front,
// recomputed later from its prompt and output so far). Pure bookkeeping: the
// forward pass and sampling belong to the caller (inference/engine/engine.cpp).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "inference/kv_cache/block_manager.h"

namespace ember::inference {

// One request's tokens and their place in the paged cache.
struct Sequence {
  int64_t id = 0;
  std::vector<int64_t> tokens;  // prompt, then the output drawn so far
  int64_t prompt_len = 0;
  int64_t n_computed = 0;                         // tokens [0, n_computed) have K/V in `blocks`
  std::vector<int32_t> blocks;                    // block table: position p lives in blocks[p / 16]
  int64_t n_registered = 0;                       // leading full blocks entered in the prefix cache
  uint64_t chain_hash = BlockManager::kRootHash;  // key of block n_registered - 1
  bool use_prefix_cache = true;                   // may take cached blocks when admitted
  // A sequence (id) whose prompt this one's starts with: admitted while that one runs with
  // those tokens computed, it shares its full blocks and a copy of its partial one, and
  // computes only its own last prompt token (parallel samples of one prompt). 0: none.
  int64_t share_from = 0;
  bool prompt_logits = false;                     // all_logits for chunks inside the prompt
  bool admitted_once = false;
  int64_t cached_prompt_tokens = 0;  // prompt tokens supplied by the cache at first admission
  int64_t preemptions = 0;
  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

// Tokens [pos0, pos0 + n) of `seq` to compute this step; `samples`: they end the sequence's
// tokens, so the last logits row gives its next token.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t pos0 = 0, n = 0;
  bool all_logits = false;
  bool samples = false;
};

struct SchedulerLimits {
  int64_t max_seqs = 16;
  int64_t max_batch_tokens = 256;
  int64_t max_queue = 256;
  // Prefill tokens a step computes at most while it also decodes (0: max_batch_tokens only).
  // Every running stream waits for the step: a big prefill chunk beside the decodes delays
  // all their next tokens at once (the inter-token latency's tail), a small one spreads the
  // prompt over a few steps. A step with no decode still prefills up to max_batch_tokens.
  int64_t max_prefill_with_decodes = 0;
};

class Scheduler {
 public:
  Scheduler(BlockManager& blocks, const SchedulerLimits& limits);

  // Queues a new sequence at the back; false (nothing queued) when max_queue wait already.
  bool add(std::unique_ptr<Sequence> seq);
  // Plans one step: blocks allocated, preemptions done. Empty when there is nothing to run.
  std::vector<ScheduledChunk> schedule();
  // Block copies (source, destination) the plan needs before its forward: the partial blocks
  // of prompts shared through Sequence::share_from. Taking them clears the list.
  std::vector<std::pair<int32_t, int32_t>> take_copies();
  // After the forward: the chunk's tokens are in the cache; full blocks enter the prefix cache.
  void complete(const ScheduledChunk& chunk);
  // Removes a sequence (finished or cancelled), waiting or running, and frees its blocks.
  std::unique_ptr<Sequence> remove(int64_t id);

  int64_t n_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t n_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  uint64_t preemptions() const { return preemptions_; }
  // Prefix-cache lookups at admission, in prompt tokens: looked up and found.
  uint64_t prefix_queries() const { return prefix_queries_; }
  uint64_t prefix_hits() const { return prefix_hits_; }

 private:
  bool grow_for_decode(Sequence& seq);  // false: seq itself was preempted
  void preempt_newest();
  bool admit_front();
  // For admit_front: the blocks of s's first n - 1 tokens from its share_from sequence when
  // that one runs with them computed (full blocks retained, the partial one copied into a new
  // block), with the number of tokens they hold; {} and 0 otherwise or when blocks lack.
  std::vector<int32_t> share_blocks(const Sequence& s, int64_t* shared);
  int64_t blocks_for(int64_t n_tokens) const;

  BlockManager& blocks_;
  SchedulerLimits limits_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in order of admission
  std::deque<std::unique_ptr<Sequence>> waiting_;
  uint64_t preemptions_ = 0, prefix_queries_ = 0, prefix_hits_ = 0;
  std::vector<std::pair<int32_t, int32_t>> copies_;
};

}  // namespace ember::inference
