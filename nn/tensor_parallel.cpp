// The shards of a tensor-parallel model's parameters and the two layers whose forward differs
// from one rank's: the row-parallel Linear and the vocabulary-parallel embedding.
#include "nn/tensor_parallel.h"

#include "autograd/ops.h"
#include "autograd/parallel_ops.h"
#include "core/kernels/shape_ops.h"

namespace ember::nn {

Tensor tensor_shard(const Tensor& whole, TensorSplit split, int64_t rank, int64_t T) {
  EMBER_CHECK(T >= 1 && rank >= 0 && rank < T, "tensor_shard: rank ", rank, " of ", T);
  if (split == TensorSplit::Whole) return whole;
  const std::vector<int64_t> shape = rank_shape(split, whole.shape(), T);  // checks divisibility
  const int64_t dim = split == TensorSplit::Columns ? 1 : 0, n = shape[static_cast<size_t>(dim)];
  // A copy, never a view: a row block of a contiguous tensor is contiguous already, and a view
  // would keep the whole tensor's storage alive beside the shard.
  if (split != TensorSplit::VocabRows) return whole.narrow(dim, rank * n, n).clone();
  Tensor shard = Tensor::zeros(shape, whole.dtype());  // padding rows stay 0
  const int64_t real = std::min(n, whole.size(0) - rank * n);
  if (real > 0) shard.narrow(0, 0, real).copy_(whole.narrow(0, rank * n, real));
  return shard;
}

Tensor tensor_unshard(const std::vector<Tensor>& shards, TensorSplit split, int64_t rows) {
  EMBER_CHECK(!shards.empty(), "tensor_unshard: no shard");
  if (split == TensorSplit::Whole) return shards.front();
  Tensor whole = kernels::cat(shards, split == TensorSplit::Columns ? 1 : 0);
  if (split == TensorSplit::VocabRows) whole = whole.narrow(0, 0, rows).contiguous();
  return whole;
}

Variable row_parallel_forward(const UnaryModule& module, const Variable& x, const ParallelGroup& g) {
  if (const auto* own = dynamic_cast<const RowParallelModule*>(&module))
    return own->row_parallel_forward(x, g);
  const auto* linear = dynamic_cast<const Linear*>(&module);
  EMBER_CHECK(linear && !linear->added_rows().defined(),
              "tensor parallelism: o_proj and down_proj must be Linear, NF4 or LoRA layers");
  const Variable y = reduce_from_group(matmul(x, linear->weight(), false, true), g);
  return linear->bias().defined() ? add(y, linear->bias()) : y;
}

Variable vocab_parallel_embedding(const Variable& shard, const Tensor& ids, const ParallelGroup& g) {
  const int64_t Vs = shard.size(0), first = g.rank() * Vs;
  std::vector<int64_t> local = ids.to(DType::Int64).to_vector<int64_t>();
  std::vector<double> mine(local.size());
  for (size_t i = 0; i < local.size(); ++i) {
    mine[i] = local[i] >= first && local[i] < first + Vs ? 1.0 : 0.0;
    local[i] = mine[i] != 0.0 ? local[i] - first : 0;  // row 0 stands in, masked to zero
  }
  Shape mask_shape = ids.shape();
  mask_shape.push_back(1);
  const Variable rows = embedding(shard, Tensor::from_vector(local, ids.shape()));
  const Variable mask(Tensor::from_vector(mine, mask_shape).to(shard.dtype()));
  return reduce_from_group(mul(rows, mask), g);
}

}  // namespace ember::nn
