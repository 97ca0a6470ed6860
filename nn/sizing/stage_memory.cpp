// The per-stage memory plan of a tensor- and pipeline-parallel layout: the data-parallel plan
// of nn/sizing/memory_plan.cpp applied to one rank's shards of one stage (docs/scaling.md,
// "Choosing T, P and D"). Every figure is float32.
#include "nn/sizing/stage_memory.h"

#include <algorithm>

#include "core/error.h"
#include "nn/sizing/model_stats.h"

namespace ember::nn {
namespace {

constexpr int64_t kFloat = 4;

constexpr auto mul = plan_mul;  // memory_plan.h's, throwing instead of wrapping
constexpr auto add = plan_add;

// One rank's shards of the parameters `stage` holds, in registration order.
std::vector<int64_t> stage_rank_numels(const std::vector<PlacedParameter>& placed, int64_t stage) {
  std::vector<int64_t> numels;
  for (const PlacedParameter& p : placed) {
    if (std::find(p.stages.begin(), p.stages.end(), stage) != p.stages.end()) numels.push_back(p.rank_numel);
  }
  return numels;
}

// What rank_memory counts for p parameters under --zero 0 or 1, over the D data ranks.
RankMemory data_parallel_part(const std::vector<int64_t>& numels, const StagePlan& plan) {
  int64_t p = 0;
  for (int64_t n : numels) p = add(p, n);
  const int64_t d = plan.data_parallel(), full = mul(kFloat, p);
  RankMemory m;
  m.parameters = full;
  if (plan.run.zero == 0) {
    m.gradients = full;
    m.optimizer = mul(2, full);
    m.communication = d > 1 ? full : 0;  // the flat buffer; no Reducer without data parallelism
    return m;
  }
  const int64_t shard = mul(kFloat, largest_shard(p, d));
  m.gradients = add(full, shard);    // local .grad, and the averaged shard
  m.optimizer = mul(2, shard);
  m.communication = full;  // the Reducer's flat buffer (memory_plan.cpp: no MPI temporaries)
  m.checkpoint_save = size_class_bytes(numels);
  return m;
}

}  // namespace

void check_stage_plan(const StagePlan& plan) {
  const int64_t n = plan.run.world_size, t = plan.layout.tp, p = plan.layout.pp();
  EMBER_CHECK(t >= 1 && p >= 1, "--tp and --pp must be >= 1, got ", t, " and ", p);
  EMBER_CHECK(n % (t * p) == 0, "--world-size ", n, " is not divisible by --tp ", t, " x --pp ", p, " = ", t * p,
              " (N = T x P x D)");
  EMBER_CHECK(plan.run.zero == 0 || plan.run.zero == 1, "--zero ", plan.run.zero, " with --tp ", t, " --pp ", p,
              ": the tensor and pipeline plan covers --zero 0 and 1");
  const int64_t m = plan.micro_batch_count();
  EMBER_CHECK(m >= 1, "--micro-batches must be >= 1, got ", m);
  EMBER_CHECK(plan.run.batch % m == 0, "--batch-size ", plan.run.batch, " is not divisible by --micro-batches ", m);
  EMBER_CHECK(plan.run.seq_len >= 1, "the sequence length must be positive");
  EMBER_CHECK(plan.run.checkpoint_every >= 0, "checkpoint_every must be >= 0, got ", plan.run.checkpoint_every);
}

int64_t stage_activation_bytes(const ModelConfig& cfg, const ParallelLayout& layout, int64_t stage, int64_t rows,
                               int64_t seq_len, int64_t every, int64_t in_flight) {
  const int64_t t = layout.tp, first = layout.first_layer(stage);
  int64_t floats = 0, recompute = 0;
  for (int64_t layer = first; layer < first + layout.stage_layers[static_cast<size_t>(stage)]; ++layer) {
    const BlockActivations parts = block_activation_parts(cfg, layer);
    const int64_t block = add(parts.whole, parts.split / t);
    const bool checkpointed = every > 0 && layer % every == 0;
    floats = add(floats, checkpointed ? cfg.d_model : block);
    if (checkpointed) recompute = std::max(recompute, block);
  }
  if (stage == layout.pp() - 1) floats = add(floats, 2 * padded_vocab(cfg.vocab_size, t) / t);  // logits, grad
  return mul(mul(kFloat, mul(rows, seq_len)), add(mul(floats, in_flight), recompute));
}

std::vector<StageMemory> stage_memory(const ModelConfig& cfg, const StagePlan& plan) {
  check_stage_plan(plan);
  const std::vector<PlacedParameter> placed = place_parameters(cfg, plan.layout);
  const int64_t pp = plan.layout.pp(), m = plan.micro_batch_count();
  std::vector<StageMemory> out;
  for (int64_t s = 0; s < pp; ++s) {
    StageMemory st;
    st.first_layer = plan.layout.first_layer(s);
    st.layers = plan.layout.stage_layers[static_cast<size_t>(s)];
    st.in_flight = micro_batches_in_flight(s, pp, m, plan.gpipe);
    const std::vector<int64_t> numels = stage_rank_numels(placed, s);
    for (int64_t n : numels) st.rank_params = add(st.rank_params, n);
    st.memory = data_parallel_part(numels, plan);
    st.memory.activations = stage_activation_bytes(cfg, plan.layout, s, plan.run.batch / m, plan.run.seq_len,
                                                   plan.run.checkpoint_every, st.in_flight);
    st.memory.runtime = runtime_bytes(plan.run.world_size);
    out.push_back(st);
  }
  return out;
}

}  // namespace ember::nn
