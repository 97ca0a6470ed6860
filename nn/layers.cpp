// Linear, Embedding, norms and dropout: thin wrappers over autograd ops.
#include "nn/layers.h"

#include "autograd/ops.h"
#include "core/kernels/shape_ops.h"
#include "nn/skip_init.h"

namespace ember::nn {

Linear::Linear(int64_t in, int64_t out, bool bias, Generator& gen, double init_std, DType dtype) {
  weight_ = register_parameter("weight", init_normal({out, in}, gen, dtype, init_std));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({out}, dtype));
}

Linear::Linear(const Tensor& weight, const Tensor& bias, bool requires_grad) {
  EMBER_CHECK(weight.dim() == 2, "Linear: weight must be 2-D [out, in], got ", shape_str(weight.shape()));
  EMBER_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)}, "Linear: bias must be [",
              weight.size(0), "], got ", shape_str(bias.shape()));
  weight_ = register_parameter("weight", weight, requires_grad);
  if (bias.defined()) bias_ = register_parameter("bias", bias, requires_grad);
}

Variable Linear::forward(const Variable& x) const {
  Variable y = matmul(x, weight_, false, true);
  if (added_rows_.defined()) y = cat({y, matmul(x, added_rows_, false, true)}, -1);
  return bias_.defined() ? add(y, bias_) : y;
}

// Rows [n >= 1, width] to append below weight [V, width].
static void check_rows(const Variable& weight, const Variable& existing, const Tensor& rows) {
  EMBER_CHECK(!existing.defined(), "add_rows: rows were already added");
  EMBER_CHECK(rows.dim() == 2 && rows.size(0) >= 1 && rows.size(1) == weight.size(1),
              "add_rows: rows must be [n >= 1, ", weight.size(1), "], got ", shape_str(rows.shape()));
}

void Linear::add_rows(const Tensor& rows) {
  EMBER_CHECK(!bias_.defined(), "Linear::add_rows: only a Linear without bias can grow");
  check_rows(weight_, added_rows_, rows);
  added_rows_ = register_parameter("added_rows", rows.to(weight_.dtype()));
}

int64_t Linear::out_features() const {
  return weight_.size(0) + (added_rows_.defined() ? added_rows_.size(0) : 0);
}

Tensor Linear::full_weight() const {
  return added_rows_.defined() ? kernels::cat({weight_.data(), added_rows_.data()}, 0) : weight_.data();
}

Embedding::Embedding(int64_t num, int64_t dim, Generator& gen, double init_std, DType dtype) {
  weight_ = register_parameter("weight", init_normal({num, dim}, gen, dtype, init_std));
}

// With added rows: ids < V read W, the others R (id - V); both lookups, then a select.
Variable Embedding::forward(const Tensor& ids) const {
  if (!added_rows_.defined()) return embedding(weight_, ids);
  const int64_t V = weight_.size(0);
  const auto all = ids.to(DType::Int64).to_vector<int64_t>();
  std::vector<int64_t> old_ids(all.size()), new_ids(all.size()), is_new(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    is_new[i] = all[i] >= V;
    old_ids[i] = is_new[i] ? 0 : all[i];
    new_ids[i] = is_new[i] ? all[i] - V : 0;
  }
  Shape cond_shape = ids.shape();
  cond_shape.push_back(1);
  return where(Tensor::from_vector(is_new, cond_shape),
               embedding(added_rows_, Tensor::from_vector(new_ids, ids.shape())),
               embedding(weight_, Tensor::from_vector(old_ids, ids.shape())));
}

void Embedding::add_rows(const Tensor& rows) {
  check_rows(weight_, added_rows_, rows);
  added_rows_ = register_parameter("added_rows", rows.to(weight_.dtype()));
}

int64_t Embedding::num_embeddings() const {
  return weight_.size(0) + (added_rows_.defined() ? added_rows_.size(0) : 0);
}

Variable Embedding::project(const Variable& h, std::function<void()> on_weight_read) const {
  // Backward runs the added rows' product first, then W's, whose callback is then the last read.
  Variable y = matmul(h, weight_, false, true, std::move(on_weight_read));
  if (added_rows_.defined()) y = cat({y, matmul(h, added_rows_, false, true)}, -1);
  return y;
}

Tensor Embedding::full_weight() const {
  return added_rows_.defined() ? kernels::cat({weight_.data(), added_rows_.data()}, 0) : weight_.data();
}

RMSNorm::RMSNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  weight_ = register_parameter("weight", Tensor::ones({dim}, dtype));
}

Variable RMSNorm::forward(const Variable& x) const { return rms_norm(x, weight_, eps_); }

LayerNorm::LayerNorm(int64_t dim, double eps, bool bias, DType dtype) : eps_(eps) {
  weight_ = register_parameter("weight", Tensor::ones({dim}, dtype));
  if (bias) bias_ = register_parameter("bias", Tensor::zeros({dim}, dtype));
}

Variable LayerNorm::forward(const Variable& x) const { return layer_norm(x, weight_, bias_, eps_); }

std::shared_ptr<UnaryModule> make_norm(const std::string& kind, int64_t dim, double eps,
                                       DType dtype) {
  if (kind == "rmsnorm") return std::make_shared<RMSNorm>(dim, eps, dtype);
  if (kind == "layernorm") return std::make_shared<LayerNorm>(dim, eps, true, dtype);
  throw Error("norm must be \"rmsnorm\" or \"layernorm\", got \"" + kind + "\"");
}

Variable Dropout::forward(const Variable& x) const {
  if (!is_training() || p_ == 0) return x;
  const uint64_t offset = gen_->advance(static_cast<uint64_t>(x.numel()));
  return dropout(x, p_, gen_->seed, offset);
}

}  // namespace ember::nn
