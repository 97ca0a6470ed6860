// The per-rank memory plan: what `ember train` (apps/train/data_parallel.cpp,
// dist::Reducer, dist::ZeroAdamW, optim::AdamW) allocates for each ZeRO stage,
// and what core's caching allocator keeps resident. Every figure is float32.
#include "nn/sizing/memory_plan.h"

#include <algorithm>
#include <set>

#include "autograd/gradient_buckets.h"
#include "core/allocator.h"
#include "core/error.h"
#include "nn/sizing/model_stats.h"
#include "nn/sizing/parameter_layout.h"

namespace ember::nn {
namespace {

constexpr int64_t kFloat = 4;
constexpr int64_t kMiB = int64_t{1} << 20;


// What the plan needs to know about the model and its buckets.
struct Sizes {
  int64_t params = 0;        // P
  int64_t shard = 0;         // the largest rank's ZeRO shard, elements
  int64_t root = 0;          // embeddings, final norm, lm_head: elements
  int64_t table = 0;         // of which the token embedding table
  int64_t largest_block = 0; // elements of the largest TransformerBlock
  std::vector<int64_t> buckets;  // Reducer bucket sizes, elements
  std::vector<int64_t> staged;   // those holding more than one parameter (ZeRO-2/3 stage them)
  int64_t save_gather = 0;       // bytes rank 0 keeps from gathering the moments to save (ZeRO)
};

Sizes sizes_of(const ModelConfig& cfg, const TrainingPlan& plan) {
  Sizes s;
  std::vector<int64_t> numels, per_block(static_cast<size_t>(cfg.n_layers), 0);
  const std::vector<ParameterEntry> layout = parameter_layout(cfg);
  for (const ParameterEntry& p : layout) {
    numels.push_back(p.numel);
    s.params += p.numel;
    (p.block < 0 ? s.root : per_block[static_cast<size_t>(p.block)]) += p.numel;
    if (p.block == kTokenTable) s.table += p.numel;
  }
  for (int64_t b : per_block) s.largest_block = std::max(s.largest_block, b);
  const int64_t w = plan.world_size;
  s.shard = largest_shard(s.params, w);
  // ZeRO-3's buckets are its units (a block; the final norm and head; the position table; the
  // token table); the others are cut by bytes.
  std::vector<int64_t> units;
  if (plan.zero == 3 && w > 1) {
    for (const ParameterEntry& p : layout) units.push_back(p.block);
  }
  for (const std::vector<size_t>& members :
       gradient_buckets(numels, kFloat, plan.first_bucket_bytes, plan.bucket_bytes, units)) {
    int64_t size = 0;
    for (const size_t k : members) size += numels[k];
    s.buckets.push_back(size);
    if (members.size() > 1) s.staged.push_back(size);
  }
  // ZeroAdamW::gather_state: each moment gathered whole on rank 0, one tensor at a time.
  s.save_gather = size_class_bytes(numels);
  return s;
}

// ZeRO-2/3 stage each bucket of several parameters in a buffer of its own, freed when its
// all-reduce completes (at one rank: in finish(), one after the other; a bucket of one parameter
// all-reduces its gradient in place), and ZeroAdamW gathers the parameters through a
// bucket-sized buffer: the caching allocator keeps one block per size class.
int64_t staging_bytes(const Sizes& s) { return size_class_bytes(s.staged); }

// Open MPI's non-blocking all-reduce (libnbc) mallocs a temporary the size of its message for
// each one in flight: counted under ZeRO-2/3, whose buckets are all-reduced in staging buffers
// of their own, for the two largest buckets (one completing while the next starts), each at
// most a piece (plan.message_bytes: a larger bucket goes in pieces of that size). Under --zero 0
// and 1 the all-reduces run on the flat buffer and the measured peak does not grow with the
// bucket size (docs/scaling.md, "Per-rank memory"): nothing is counted.
int64_t mpi_temporaries(const Sizes& s, const TrainingPlan& plan) {
  if (plan.world_size == 1) return 0;
  std::vector<int64_t> buckets = s.buckets;
  std::sort(buckets.rbegin(), buckets.rend());
  int64_t bytes = 0;
  for (size_t i = 0; i < std::min<size_t>(2, buckets.size()); ++i) {
    bytes += std::min(buckets[i] * kFloat, plan.message_bytes);
  }
  return bytes;
}

// --zero 3: parameters sharded 4P/W; a block's parameters all-gathered before its forward
// and backward and freed after, the next block's gather prefetched (two blocks resident),
// the root units (embeddings, final norm, lm_head) gathered for the forward and the head's
// backward; gradients as ZeRO-2, staged and reduced per unit (sizes_of: the buckets are the
// units), except that the token table's gradient reuses the table's memory (the table is
// freed before that gradient is allocated: once the tied head has read it, or after the
// head's backward). The save gathers a unit at a time into its parameters' own blocks, and
// each moment into a block of a parameter's size class, which the units' releases left
// cached: nothing beyond training.
// At one rank the shard is the whole model and nothing is gathered.
void zero3_parameters(const Sizes& s, int64_t world, RankMemory& m) {
  if (world == 1) return;
  m.parameters = kFloat * (s.shard + s.root + 2 * s.largest_block);
  m.gradients -= kFloat * s.table;
  m.checkpoint_save = 0;
}

}  // namespace

int64_t plan_mul(int64_t a, int64_t b) {
  int64_t r;
  EMBER_CHECK(!__builtin_mul_overflow(a, b, &r), "the memory plan overflows 64-bit integers (more than 2^63 bytes)");
  return r;
}

int64_t plan_add(int64_t a, int64_t b) {
  int64_t r;
  EMBER_CHECK(!__builtin_add_overflow(a, b, &r), "the memory plan overflows 64-bit integers (more than 2^63 bytes)");
  return r;
}

int64_t size_class_bytes(const std::vector<int64_t>& numels) {
  std::set<size_t> classes;
  for (int64_t n : numels) classes.insert(allocator_bucket_size(static_cast<size_t>(n * kFloat)));
  int64_t bytes = 0;
  for (size_t c : classes) bytes += static_cast<int64_t>(c);
  return bytes;
}

int64_t largest_shard(int64_t elements, int64_t ranks) {
  // dist::Reducer: rank r owns [N r / W, N (r+1) / W), cut at multiples of 16 elements.
  int64_t shard = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    auto start = [&](int64_t rank) {  // 128-bit: P x W exceeds int64 for P near 2^48
      return rank == ranks ? elements
                           : static_cast<int64_t>(static_cast<__int128>(elements) * rank / ranks) / 16 * 16;
    };
    shard = std::max(shard, start(r + 1) - start(r));
  }
  return shard;
}

int64_t RankMemory::total() const {
  int64_t sum = 0;
  for (int64_t part : {parameters, gradients, optimizer, activations, communication, checkpoint_save, runtime}) {
    sum = plan_add(sum, part);
  }
  return sum;
}

int64_t runtime_bytes(int64_t world_size) {
  // Peak RSS of `ember train` on a model of 6.7 k parameters, 2 steps, with the matmul peak
  // cached (docs/scaling.md, "Per-rank memory"): 41.7 MiB alone; under mpirun -np 2, 49.6 MiB
  // on rank 0 (which also tokenizes the data and writes the checkpoint) and 37.2 MiB on rank 1.
  return world_size == 1 ? 42 * kMiB : 50 * kMiB;
}

int64_t activation_bytes(const ModelConfig& cfg, int64_t batch, int64_t seq_len, int64_t every) {
  EMBER_CHECK(every >= 0, "checkpoint_every must be >= 0, got ", every);
  int64_t floats = 2 * cfg.vocab_size, recompute = 0;  // head: logits and their gradient
  for (int64_t layer = 0; layer < cfg.n_layers; ++layer) {
    const int64_t block = block_activation_floats(cfg, layer);
    const bool checkpointed = every > 0 && layer % every == 0;
    floats += checkpointed ? cfg.d_model : block;
    if (checkpointed) recompute = std::max(recompute, block);
  }
  return plan_mul(plan_mul(kFloat, plan_mul(batch, seq_len)), floats + recompute);
}

RankMemory rank_memory(const ModelConfig& cfg, const TrainingPlan& plan) {
  const int64_t w = plan.world_size;
  EMBER_CHECK(w >= 1 && w <= (int64_t{1} << 20), "the world size must be between 1 and 2^20, got ", w);
  EMBER_CHECK(plan.zero >= 0 && plan.zero <= 3, "the ZeRO stage must be 0, 1, 2 or 3, got ", plan.zero);
  EMBER_CHECK(plan.batch >= 1 && plan.seq_len >= 1, "batch and sequence length must be positive");
  EMBER_CHECK(plan.bucket_bytes >= 1 && plan.first_bucket_bytes >= 1, "bucket sizes must be positive");
  const Sizes s = sizes_of(cfg, plan);
  const int64_t full = kFloat * s.params, shard = kFloat * s.shard;
  RankMemory m;
  m.runtime = runtime_bytes(w);
  m.activations = activation_bytes(cfg, plan.batch, plan.seq_len, plan.checkpoint_every);
  m.parameters = full;
  if (plan.zero == 0) {
    m.gradients = full;
    m.optimizer = 2 * full;
    m.communication = w > 1 ? full : 0;  // the flat buffer; no Reducer at one rank
    return m;
  }
  m.optimizer = 2 * shard;
  m.checkpoint_save = s.save_gather;  // rank 0 gathers the moments a tensor at a time to save
  if (plan.zero == 1) {
    m.gradients = full + shard;  // local .grad, and the averaged shard
    m.communication = full;  // the flat buffer
    return m;
  }
  // ZeRO-2/3: at one rank backward keeps every .grad until finish(); with more, each .grad is
  // released once staged, so about one block's and the root unit's are live at a time.
  m.gradients = shard + (w == 1 ? full : kFloat * (s.root + s.largest_block));
  m.communication = staging_bytes(s) + mpi_temporaries(s, plan);
  if (plan.zero == 3) zero3_parameters(s, w, m);
  return m;
}

}  // namespace ember::nn
