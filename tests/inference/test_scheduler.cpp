// The continuous-batching scheduler with fake forward results: every running
// sequence decodes before any prefill, the token budget and the seat limit hold,
// long prompts are chunked (in smaller chunks beside decodes: max_prefill_with_decodes),
// the queue is capped, prefix hits skip computed blocks, and running out of
// blocks preempts the newest sequence, which is later recomputed from its
// prompt and output so far; a sample of a running sequence's prompt shares its blocks.
#include <catch2/catch.hpp>
#include <memory>
#include <numeric>

#include "inference/scheduler/scheduler.h"

using namespace ember::inference;

namespace {

std::unique_ptr<Sequence> make_seq(int64_t id, int64_t prompt_len, int64_t first_token = 1) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens.resize(static_cast<size_t>(prompt_len));
  std::iota(s->tokens.begin(), s->tokens.end(), first_token);
  s->prompt_len = prompt_len;
  return s;
}

// What the engine does after a forward: the chunks are computed, sampling ones draw a token.
void fake_forward(Scheduler& sched, const std::vector<ScheduledChunk>& plan) {
  for (const ScheduledChunk& c : plan) {
    sched.complete(c);
    if (c.samples) c.seq->tokens.push_back(7);
  }
}

int64_t total_tokens(const std::vector<ScheduledChunk>& plan) {
  int64_t n = 0;
  for (const ScheduledChunk& c : plan) n += c.n;
  return n;
}

}  // namespace

TEST_CASE("decodes come first, prefill is chunked under the budget", "[scheduler]") {
  BlockManager bm(64, false);
  Scheduler sched(bm, {4, 20, 8});
  REQUIRE(sched.add(make_seq(1, 5)));
  REQUIRE(sched.add(make_seq(2, 30)));
  std::vector<ScheduledChunk> plan = sched.schedule();
  // Step 1: sequence 1's 5 prompt tokens, then 15 of sequence 2's 30.
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].seq->id == 1);
  CHECK(plan[0].n == 5);
  CHECK(plan[0].samples);
  CHECK(plan[1].seq->id == 2);
  CHECK(plan[1].pos0 == 0);
  CHECK(plan[1].n == 15);
  CHECK(!plan[1].samples);
  CHECK(total_tokens(plan) == 20);
  CHECK(bm.n_used() == 1 + 2);  // blocks for every prompt token at admission
  fake_forward(sched, plan);
  sched.add(make_seq(3, 12));
  // Step 2: sequence 1 decodes first, then 15 more of sequence 2 (ends it), then 3's prefill.
  plan = sched.schedule();
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].seq->id == 1);
  CHECK(plan[0].n == 1);
  CHECK(plan[0].pos0 == 5);
  CHECK(plan[1].seq->id == 2);
  CHECK(plan[1].pos0 == 15);
  CHECK(plan[1].n == 15);
  CHECK(plan[1].samples);
  CHECK(plan[2].seq->id == 3);
  CHECK(plan[2].n == 4);  // what the budget leaves
  CHECK(total_tokens(plan) == 20);
  fake_forward(sched, plan);
  // Step 3: two decodes (1 and 2) before 3's next chunk.
  plan = sched.schedule();
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].n == 1);
  CHECK(plan[1].n == 1);
  CHECK(plan[1].seq->id == 2);
  CHECK(plan[2].seq->id == 3);
  CHECK(plan[2].pos0 == 4);
  CHECK(plan[2].n == 8);
  CHECK(plan[2].samples);
}

TEST_CASE("beside decodes, prefill stops at max_prefill_with_decodes, alone it fills the budget",
          "[scheduler]") {
  BlockManager bm(64, false);
  Scheduler sched(bm, {4, 20, 8, 6});
  REQUIRE(sched.add(make_seq(1, 3)));
  REQUIRE(sched.add(make_seq(2, 40)));
  // Step 1, nothing decoding yet: the whole budget, 3 + 17.
  std::vector<ScheduledChunk> plan = sched.schedule();
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].n == 3);
  CHECK(plan[1].n == 17);
  fake_forward(sched, plan);
  // Step 2: sequence 1 decodes, so sequence 2 gets 6 prefill tokens, not 19.
  plan = sched.schedule();
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].seq->id == 1);
  CHECK(plan[0].n == 1);
  CHECK(plan[1].seq->id == 2);
  CHECK(plan[1].pos0 == 17);
  CHECK(plan[1].n == 6);
  fake_forward(sched, plan);
  // Sequence 1 leaves: step 3 prefills 20 again (17 + 6 = 23 computed, 17 of 40 left).
  REQUIRE(sched.remove(1) != nullptr);
  plan = sched.schedule();
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].pos0 == 23);
  CHECK(plan[0].n == 17);
  CHECK(plan[0].samples);
  // A negative cap is refused.
  CHECK_THROWS_WITH(Scheduler(bm, {4, 20, 8, -1}), Catch::Contains("max_prefill_with_decodes"));
}

TEST_CASE("seats cap the running set, the queue is capped", "[scheduler]") {
  BlockManager bm(64, false);
  Scheduler sched(bm, {2, 100, 3});
  for (int64_t id = 1; id <= 3; ++id) REQUIRE(sched.add(make_seq(id, 4)));
  CHECK(!sched.add(make_seq(4, 4)));  // max_queue 3 wait already
  const std::vector<ScheduledChunk> plan = sched.schedule();
  CHECK(plan.size() == 2);
  CHECK(sched.n_running() == 2);
  CHECK(sched.n_waiting() == 1);
  CHECK(sched.add(make_seq(4, 4)));
  fake_forward(sched, plan);
  sched.remove(1);  // finished: its seat and block go to the next in line
  const std::vector<ScheduledChunk> next = sched.schedule();
  REQUIRE(next.size() == 2);
  CHECK(next[0].seq->id == 2);
  CHECK(next[1].seq->id == 3);
  CHECK(bm.n_used() == 2);
}

TEST_CASE("out of blocks, the newest sequence is preempted and recomputed later", "[scheduler]") {
  BlockManager bm(3, false);
  Scheduler sched(bm, {4, 100, 8});
  sched.add(make_seq(1, 16));  // exactly one block each
  sched.add(make_seq(2, 16));
  sched.add(make_seq(3, 16, 50));
  std::vector<ScheduledChunk> plan = sched.schedule();
  REQUIRE(plan.size() == 3);
  CHECK(bm.n_free() == 0);
  fake_forward(sched, plan);
  // Each decode at position 16 needs a second block: 1 takes... none is free, so 3 (the
  // newest) is preempted and its block goes to 1; then 2 preempts itself.
  plan = sched.schedule();
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].seq->id == 1);
  CHECK(plan[0].pos0 == 16);
  CHECK(sched.preemptions() == 2);
  CHECK(sched.n_running() == 1);
  REQUIRE(sched.n_waiting() == 2);
  CHECK(sched.waiting()[0]->id == 2);  // requeued at the front, older first
  CHECK(sched.waiting()[1]->id == 3);
  CHECK(sched.waiting()[1]->n_computed == 0);
  CHECK(sched.waiting()[1]->tokens.size() == 17);  // its drawn token is kept
  CHECK(sched.waiting()[1]->blocks.empty());
  fake_forward(sched, plan);
  sched.remove(1);  // 1 finishes: 2 comes back and recomputes prompt + output (17 tokens)
  plan = sched.schedule();
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].seq->id == 2);
  CHECK(plan[0].pos0 == 0);
  CHECK(plan[0].n == 17);
  CHECK(plan[0].samples);
  CHECK(bm.n_used() == 2);
}

TEST_CASE("admission reuses cached full blocks and counts hits in tokens", "[scheduler]") {
  BlockManager bm(16, true);
  Scheduler sched(bm, {4, 256, 8});
  sched.add(make_seq(1, 40));
  std::vector<ScheduledChunk> plan = sched.schedule();
  fake_forward(sched, plan);
  CHECK(sched.prefix_queries() == 40);
  CHECK(sched.prefix_hits() == 0);
  auto second = make_seq(2, 45);  // the same first 40 tokens, then 5 others
  for (size_t i = 40; i < 45; ++i) second->tokens[i] = 900 + static_cast<int64_t>(i);
  sched.add(std::move(second));
  plan = sched.schedule();
  REQUIRE(plan.size() == 2);  // 1's decode, 2's prefill from position 32
  CHECK(plan[1].seq->id == 2);
  CHECK(plan[1].pos0 == 32);
  CHECK(plan[1].n == 13);
  CHECK(plan[1].seq->cached_prompt_tokens == 32);
  CHECK(plan[1].seq->blocks[0] == plan[0].seq->blocks[0]);  // shared
  CHECK(plan[1].seq->blocks[2] != plan[0].seq->blocks[2]);  // partial: private
  CHECK(sched.prefix_queries() == 85);
  CHECK(sched.prefix_hits() == 32);
  // A prompt of exactly 32 cached tokens reuses only the first block: its last token
  // must be computed to give logits.
  fake_forward(sched, plan);
  sched.add(make_seq(3, 32));
  plan = sched.schedule();
  REQUIRE(plan.size() == 3);
  CHECK(plan[2].pos0 == 16);
  CHECK(plan[2].n == 16);
  CHECK(plan[2].seq->cached_prompt_tokens == 16);
}

TEST_CASE("a sample of a running sequence's prompt shares its blocks, the partial one copied",
          "[scheduler]") {
  BlockManager bm(16, true);
  Scheduler sched(bm, {4, 256, 8});
  sched.add(make_seq(1, 20));
  std::vector<ScheduledChunk> plan = sched.schedule();
  fake_forward(sched, plan);  // 1's prompt computed: blocks 0 (full) and 1 (4 of 16)
  const std::vector<int32_t> parent = sched.running()[0]->blocks;
  auto sample = make_seq(2, 20);
  sample->share_from = 1;
  sched.add(std::move(sample));
  auto other = make_seq(3, 20, 2);  // a different prompt: nothing shared
  other->share_from = 1;
  sched.add(std::move(other));
  plan = sched.schedule();
  REQUIRE(plan.size() == 3);  // 1's decode, 2's last prompt token, 3's whole prompt
  CHECK(plan[1].seq->id == 2);
  CHECK(plan[1].pos0 == 19);
  CHECK(plan[1].n == 1);
  CHECK(plan[1].samples);
  CHECK(plan[1].seq->cached_prompt_tokens == 19);
  CHECK(plan[1].seq->blocks[0] == parent[0]);
  CHECK(bm.ref_count(parent[0]) == 2);
  CHECK(plan[1].seq->blocks[1] != parent[1]);
  const auto copies = sched.take_copies();
  REQUIRE(copies.size() == 1);
  CHECK(copies[0] == std::make_pair(parent[1], plan[1].seq->blocks[1]));
  CHECK(sched.take_copies().empty());
  CHECK(plan[2].seq->id == 3);
  CHECK(plan[2].pos0 == 0);
  CHECK(plan[2].n == 20);
  CHECK(sched.prefix_hits() == 19);
  // Once 1 is gone, a sample falls back to the prefix cache: the full block only.
  fake_forward(sched, plan);
  sched.remove(1);
  auto late = make_seq(4, 20);
  late->share_from = 1;
  sched.add(std::move(late));
  plan = sched.schedule();
  REQUIRE(plan.size() == 3);
  CHECK(plan[2].seq->id == 4);
  CHECK(plan[2].pos0 == 16);
  CHECK(sched.take_copies().empty());
}
