// The data-parallel pieces of `ember train` (under mpirun; see docs/scaling.md):
// agreement on errors at set-up, the gradient reducer and the optimizer
// (AdamW, or ZeRO-1's sharded AdamW), and the note when a resumed run's
// global batch differs from the checkpoint's.
#pragma once
#include <exception>
#include <memory>
#include <string>

#include "apps/train/trainer.h"
#include "core/user_message.h"
#include "dist/communicator.h"
#include "dist/reducer.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace ember::apps {

// Runs f on every rank and agrees on the outcome: when f threw on any rank,
// every rank throws the lowest failing rank's message, so no rank is left
// waiting in a collective. The message is user_message's, as main's for one
// process (no raw library text). One process: f's own exception, unchanged.
template <class F>
void agreed(const dist::Communicator& comm, F&& f) {
  if (comm.world_size() == 1) {
    f();
    return;
  }
  std::string error;
  try {
    f();
  } catch (const std::exception& e) {
    error = user_message(e, "train");
  }
  comm.raise_if_any_failed(error);
}

struct Optimization {
  std::unique_ptr<dist::Reducer> reducer;  // null in a plain single-process run
  std::unique_ptr<optim::Optimizer> optimizer;
};
// The reducer over model's parameters (buckets of --bucket-mb, the first 1 MiB)
// when there are several ranks or --zero 1, and AdamW or dist::ZeroAdamW.
Optimization make_optimization(dist::Communicator& comm, nn::Transformer& model, const TrainOptions& o);

// Rank 0 prints what changed when the checkpoint's global batch (saved_world
// x saved_batch rows) differs from this run's (world x batch).
void note_global_batch_change(const dist::Communicator& comm, int64_t saved_world, int64_t saved_batch,
                              int64_t batch);

}  // namespace ember::apps
