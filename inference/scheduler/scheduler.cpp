// One step's plan: decodes of running sequences (one token each, a block added
// when a position starts a new one, preempting the newest sequence when none is
// left), then prefill chunks of partly computed sequences, then admissions from
// the front of the queue while seats, blocks and the token budget last (a sample
// of a running sequence's prompt sharing its blocks, else cached full blocks).
#include "inference/scheduler/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "inference/model_runner/paged_forward.h"

namespace ember::inference {

Scheduler::Scheduler(BlockManager& blocks, const SchedulerLimits& limits)
    : blocks_(blocks), limits_(limits) {
  EMBER_CHECK(limits.max_seqs > 0 && limits.max_batch_tokens > 0 && limits.max_queue >= 0 &&
                  limits.max_prefill_with_decodes >= 0,
              "scheduler: max_seqs and max_batch_tokens must be > 0, max_queue and "
              "max_prefill_with_decodes >= 0");
}

int64_t Scheduler::blocks_for(int64_t n_tokens) const {
  return (n_tokens + kKVBlockSize - 1) / kKVBlockSize;
}

bool Scheduler::add(std::unique_ptr<Sequence> seq) {
  if (n_waiting() >= limits_.max_queue) return false;
  waiting_.push_back(std::move(seq));
  return true;
}

void Scheduler::preempt_newest() {
  std::unique_ptr<Sequence> victim = std::move(running_.back());
  running_.pop_back();
  blocks_.release_all(victim->blocks);
  victim->n_computed = 0;
  victim->n_registered = 0;
  victim->chain_hash = BlockManager::kRootHash;
  ++victim->preemptions;
  ++preemptions_;
  waiting_.push_front(std::move(victim));
}

bool Scheduler::grow_for_decode(Sequence& seq) {
  while (static_cast<int64_t>(seq.blocks.size()) < blocks_for(seq.n_computed + 1)) {
    const int32_t b = blocks_.allocate();
    if (b >= 0) {
      seq.blocks.push_back(b);
      continue;
    }
    const bool self = running_.back().get() == &seq;
    preempt_newest();
    if (self) return false;
  }
  return true;
}

std::vector<int32_t> Scheduler::share_blocks(const Sequence& s, int64_t* shared) {
  *shared = 0;
  const int64_t k = std::min(s.prompt_len, static_cast<int64_t>(s.tokens.size())) - 1;
  const Sequence* from = nullptr;
  for (const auto& r : running_) from = r->id == s.share_from ? r.get() : from;
  if (s.share_from == 0 || k <= 0 || !from || from->n_computed < k ||
      !std::equal(s.tokens.begin(), s.tokens.begin() + k, from->tokens.begin())) {
    return {};
  }
  const int64_t full = k / kKVBlockSize, partial = k % kKVBlockSize > 0;
  if (blocks_.n_free() < blocks_for(static_cast<int64_t>(s.tokens.size())) - full) return {};
  std::vector<int32_t> table(from->blocks.begin(), from->blocks.begin() + full);
  for (const int32_t b : table) blocks_.retain(b);
  if (partial) {
    table.push_back(blocks_.allocate());
    copies_.emplace_back(from->blocks[static_cast<size_t>(full)], table.back());
  }
  *shared = k;
  return table;
}

std::vector<std::pair<int32_t, int32_t>> Scheduler::take_copies() {
  return std::exchange(copies_, {});
}

bool Scheduler::admit_front() {
  Sequence& s = *waiting_.front();
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  uint64_t hash = BlockManager::kRootHash;
  int64_t hit = 0;
  const size_t n_copies = copies_.size();
  std::vector<int32_t> table = share_blocks(s, &hit);
  for (int64_t b = 0; b < hit / kKVBlockSize; ++b) {  // the shared full blocks' key
    hash = BlockManager::block_hash(hash, s.tokens.data() + b * kKVBlockSize);
  }
  if (hit == 0 && s.use_prefix_cache) {
    table = blocks_.match_prefix(s.tokens.data(), n - 1, &hash);
    hit = static_cast<int64_t>(table.size()) * kKVBlockSize;
  }
  const int64_t need = blocks_for(n) - static_cast<int64_t>(table.size());
  if (blocks_.n_free() < need) {
    blocks_.release_all(table);
    copies_.resize(n_copies);  // no copy into a released block
    return false;
  }
  for (int64_t i = 0; i < need; ++i) table.push_back(blocks_.allocate());
  if (!s.admitted_once) {
    s.admitted_once = true;
    s.cached_prompt_tokens = std::min(hit, s.prompt_len);
    prefix_queries_ += static_cast<uint64_t>(s.prompt_len);
    prefix_hits_ += static_cast<uint64_t>(s.cached_prompt_tokens);
  }
  s.blocks = std::move(table);
  s.n_computed = hit;
  s.n_registered = hit / kKVBlockSize;
  s.chain_hash = hash;
  running_.push_back(std::move(waiting_.front()));
  waiting_.pop_front();
  return true;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> plan;
  int64_t budget = limits_.max_batch_tokens;
  auto add_chunk = [&](Sequence& s) {
    const int64_t n = std::min(s.remaining(), budget);
    const bool all = s.prompt_logits && s.n_computed < s.prompt_len;
    plan.push_back({&s, s.n_computed, n, all, n == s.remaining()});
    budget -= n;
  };
  for (size_t i = 0; i < running_.size() && budget > 0;) {  // decodes first
    Sequence& s = *running_[i];
    if (s.remaining() != 1) {
      ++i;
      continue;
    }
    if (!grow_for_decode(s)) continue;  // s was the newest: preempted, the loop ends
    add_chunk(s);
    ++i;
  }
  const bool decodes = !plan.empty();  // the plan holds only decodes so far
  if (decodes && limits_.max_prefill_with_decodes > 0) {  // their latency before the prefill's
    budget = std::min(budget, limits_.max_prefill_with_decodes);
  }
  for (const auto& s : running_) {  // chunks of partly prefilled sequences
    if (budget == 0) break;
    if (s->remaining() > 1) add_chunk(*s);
  }
  while (budget > 0 && n_running() < limits_.max_seqs && !waiting_.empty() && admit_front()) {
    add_chunk(*running_.back());
  }
  return plan;
}

void Scheduler::complete(const ScheduledChunk& chunk) {
  Sequence& s = *chunk.seq;
  EMBER_CHECK(chunk.pos0 == s.n_computed, "scheduler: chunk at ", chunk.pos0, " but ", s.n_computed,
              " tokens computed");
  s.n_computed += chunk.n;
  while ((s.n_registered + 1) * kKVBlockSize <= s.n_computed) {
    const int64_t* t = s.tokens.data() + s.n_registered * kKVBlockSize;
    blocks_.register_full(s.blocks[static_cast<size_t>(s.n_registered)], s.chain_hash, t);
    s.chain_hash = BlockManager::block_hash(s.chain_hash, t);
    ++s.n_registered;
  }
}

std::unique_ptr<Sequence> Scheduler::remove(int64_t id) {
  std::unique_ptr<Sequence> out;
  const auto match = [id](const std::unique_ptr<Sequence>& s) { return s->id == id; };
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    out = std::move(*it);
    running_.erase(it);
  } else if (auto w = std::find_if(waiting_.begin(), waiting_.end(), match); w != waiting_.end()) {
    out = std::move(*w);
    waiting_.erase(w);
  }
  if (out) blocks_.release_all(out->blocks);
  return out;
}

}  // namespace ember::inference
