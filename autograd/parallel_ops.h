// The tensor-parallel autograd ops over a ParallelGroup (docs/model.md#tensor-parallel-loss):
// Megatron-LM's two conjugate communication operators and the vocab-parallel cross-entropy
// with z-loss. Every rank of the group calls them in the same order, forward and backward.
// The group must outlive the backward pass of every graph recorded with it.
#pragma once
#include <cstdint>

#include "autograd/ops.h"
#include "autograd/parallel_group.h"

namespace ember {

// Identity forward, all-reduce-sum of the gradient backward (Megatron's f): the input of a
// column-parallel linear, whole on every rank, whose gradient is the sum of the ranks' parts.
Variable copy_to_group(const Variable& x, const ParallelGroup& group);
// All-reduce-sum forward, identity backward (Megatron's g): the partial outputs of a
// row-parallel linear summed into the whole output on every rank.
Variable reduce_from_group(const Variable& x, const ParallelGroup& group);

// cross_entropy over logits split by vocabulary across the group: rank t holds logits [N, Vs]
// of the vocabulary rows [t Vs, (t + 1) Vs) of the padded vocabulary Vs * group.size(), where
// Vs = ceil(vocab_size / group.size()); rows >= vocab_size are padding and never count.
// Targets [N] are global ids in [0, vocab_size). The loss, ce and z are those of cross_entropy
// over the whole logits (the same value on every rank); the gradient is its local shard's part
// (0 in the padding columns). Two collectives per call: a max, then a sum.
CrossEntropyResult vocab_parallel_cross_entropy(const Variable& logits, const Tensor& targets,
                                                int64_t vocab_size, const ParallelGroup& group,
                                                double z_loss_coef = 0);
// The weighted form, as cross_entropy's: weight [N] (not differentiated) and normaliser norm.
CrossEntropyResult vocab_parallel_cross_entropy(const Variable& logits, const Tensor& targets,
                                                int64_t vocab_size, const Tensor& weight,
                                                double norm, const ParallelGroup& group,
                                                double z_loss_coef = 0);

}  // namespace ember
