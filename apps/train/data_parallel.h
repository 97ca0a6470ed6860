// The data-parallel pieces of `ember train` (under mpirun; see docs/scaling.md):
// the gradient reducer and the optimizer
// (AdamW, or ZeRO-1/2's sharded AdamW), and the note when a resumed run's
// global batch differs from the checkpoint's.
#pragma once
#include <memory>
#include <string>

#include "apps/train/trainer.h"
#include "dist/agreed.h"
#include "dist/communicator.h"
#include "dist/reducer.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace ember::apps {

using dist::agreed;

struct Optimization {
  std::unique_ptr<dist::Reducer> reducer;  // null in a plain single-process run
  std::unique_ptr<optim::Optimizer> optimizer;
};
// The reducer over the trained parameters `named` (buckets of --bucket-mb, the first 1 MiB)
// when there are several ranks or --zero 1 or 2, and AdamW or dist::ZeroAdamW over them.
Optimization make_optimization(dist::Communicator& comm,
                               const std::vector<std::pair<std::string, Variable>>& named,
                               const TrainOptions& o);

// Rank 0 prints what changed when the checkpoint's global batch (saved_world
// x saved_batch rows) differs from this run's (world x batch).
void note_global_batch_change(const dist::Communicator& comm, int64_t saved_world, int64_t saved_batch,
                              int64_t batch);

}  // namespace ember::apps
