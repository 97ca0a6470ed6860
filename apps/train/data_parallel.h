// The data-parallel pieces of `ember train` (under mpirun; see docs/scaling.md):
// the gradient reducer and the optimizer
// (AdamW, or ZeRO-1/2/3's sharded AdamW; ZeRO-3's sharded parameters wired to
// the model's blocks), and the note when a resumed run's global batch differs
// from the checkpoint's.
#pragma once
#include <memory>
#include <string>

#include "apps/train/trainer.h"
#include "dist/agreed.h"
#include "dist/communicator.h"
#include "dist/reducer.h"
#include "dist/sharded_parameters.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace ember::apps {

using dist::agreed;

struct Optimization {
  std::unique_ptr<dist::Reducer> reducer;  // null in a plain single-process run
  std::unique_ptr<dist::ShardedParameters> sharded;  // --zero 3 only
  std::unique_ptr<optim::Optimizer> optimizer;
};
// The reducer over the trained parameters `named` among comm's ranks, the data-parallel ones
// (under --tp those holding the same shards) (buckets of --bucket-mb, the first 1 MiB;
// with --zero 3 one bucket per block and the rest, each sharded on its own) when there are
// several ranks or --zero 1, 2 or 3, and AdamW or dist::ZeroAdamW over them. --zero 3: every
// parameter of `model` is trained; their shards are taken (so call it once the weights are the
// same on every rank) and the model's blocks gather and free theirs (nn::BlockResidency).
Optimization make_optimization(dist::Communicator& comm, nn::Transformer& model,
                               const std::vector<std::pair<std::string, Variable>>& named,
                               const TrainOptions& o);

// --zero 3: every parameter resident while it lives (code that reads them, on some ranks
// only: checkpoints, evaluation, the sample), released after. Collective; nothing otherwise.
class HeldParameters {
 public:
  HeldParameters(const Optimization& optimization, bool hold = true);
  ~HeldParameters();
  HeldParameters(const HeldParameters&) = delete;
  HeldParameters& operator=(const HeldParameters&) = delete;

 private:
  dist::ShardedParameters* sharded_ = nullptr;
};

// Rank 0 prints what changed when the checkpoint's global batch (saved_world
// x saved_batch rows) differs from this run's (world x batch; world: its data-parallel ranks).
void note_global_batch_change(const dist::Communicator& comm, int64_t saved_world, int64_t saved_batch,
                              int64_t world, int64_t batch);

}  // namespace ember::apps
