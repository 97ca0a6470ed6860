// nn::BlockResidency: where a Transformer tells whoever keeps its parameters
// (ZeRO-3's sharded store, in dist, wired by apps) when block i's parameters
// are needed: before its forward, after it, before its backward (also before
// a checkpointed block's recompute) and after it. nn knows nothing of how.
#pragma once
#include <cstddef>

namespace ember::nn {

class BlockResidency {
 public:
  virtual ~BlockResidency() = default;
  // Transformer::forward is about to run: the non-block parameters (embeddings,
  // final norm, lm_head) must be resident until the caller says otherwise.
  virtual void forward_begins() = 0;
  virtual void before_forward(size_t block) = 0;
  virtual void after_forward(size_t block) = 0;
  // Called from the graph: only when the forward recorded one (grad mode on,
  // the block's input or parameters requiring grad).
  virtual void before_backward(size_t block) = 0;
  virtual void after_backward(size_t block) = 0;
  // From the graph too: the head's backward (final norm, lm_head or the tied embedding's
  // projection) is done; the non-block parameters are not read again in this backward (the
  // embeddings' backward does not read their weights).
  virtual void after_head_backward() = 0;
  // From the graph: the tied head's backward has read the token table for the last time (it
  // computed the gradient of its input and is about to compute the table's).
  virtual void tied_table_read() {}
};

}  // namespace ember::nn
