// Megatron-LM tensor parallelism of the Transformer (docs/scaling.md#tensor-parallelism): a
// model built whole from its seed (so its weights are one process's) keeps the shard of each
// parameter that nn/parallel_plan.h's split rule gives its tensor rank; the blocks then run
// column-parallel q, k, v, gate and up after copy_to_group, row-parallel o and down before
// reduce_from_group (their bias added once, after the sum), and the vocabulary-parallel
// embedding and head.
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/parallel_group.h"
#include "autograd/variable.h"
#include "nn/layers.h"
#include "nn/parallel_plan.h"

namespace ember::nn {

// The tensor-parallel group of a model (null: one rank). The group outlives the model.
struct TensorParallel {
  const ParallelGroup* group = nullptr;
  int64_t size() const { return group ? group->size() : 1; }
  int64_t rank() const { return group ? group->rank() : 0; }
  bool active() const { return size() > 1; }
};

// Tensor rank `rank`'s shard of a whole parameter split by `split` over T ranks: rows or
// columns [rank n / T, (rank + 1) n / T); VocabRows: rows of the whole padded with zero rows
// to padded_vocab(V, T); Whole: the tensor itself. A contiguous copy (Whole: shared).
Tensor tensor_shard(const Tensor& whole, TensorSplit split, int64_t rank, int64_t T);
// The whole tensor of `rows` rows (VocabRows: without the padding) from its T shards, rank
// order: the inverse of tensor_shard.
Tensor tensor_unshard(const std::vector<Tensor>& shards, TensorSplit split, int64_t rows);

// A module other than a plain Linear that runs row-parallel (an NF4 projection, a LoRA one):
// its forward on this rank's part x of the input, summed over the group, as one rank's forward
// on the whole input.
class RowParallelModule {
 public:
  virtual ~RowParallelModule() = default;
  virtual Variable row_parallel_forward(const Variable& x, const ParallelGroup& g) const = 0;
};

// y = sum over the group of x W_t^T, + b: a row-parallel Linear (each rank its input columns
// W_t of W) on this rank's part x of the input; the bias, whole, is added once after the sum.
// A RowParallelModule runs its own.
Variable row_parallel_forward(const UnaryModule& linear, const Variable& x, const ParallelGroup& g);

// The rows of the vocabulary-parallel embedding: rank t holds rows [t Vs, (t + 1) Vs) of the
// padded table; ids outside them read zeros, and the sum over the group is every id's row.
Variable vocab_parallel_embedding(const Variable& shard, const Tensor& ids, const ParallelGroup& g);

}  // namespace ember::nn
