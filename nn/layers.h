// Basic layers: Linear, Embedding, RMSNorm, LayerNorm, Dropout. Each draws
// its initial weights from the Generator it is built with (normal(0, std);
// norms start at 1 and biases at 0), so a seeded model is reproducible.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "core/rng.h"
#include "nn/module.h"

namespace ember::nn {

// A module with one input and one output (norms, FFNs, ...).
class UnaryModule : public Module {
 public:
  virtual Variable forward(const Variable& x) const = 0;
};

// y = x W^T (+ b); W [out, in], x [..., in] -> [..., out].
class Linear : public UnaryModule {
 public:
  Linear(int64_t in, int64_t out, bool bias, Generator& gen, double init_std = 0.02,
         DType dtype = DType::Float32);
  // Over given tensors (bias optional), e.g. a merged or adapter weight.
  explicit Linear(const Tensor& weight, const Tensor& bias = Tensor(), bool requires_grad = true);
  Variable forward(const Variable& x) const override;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }

  // Vocabulary growth (nn/adapters/adapters.h add_vocab_rows): n more output rows R [n, in], a
  // parameter of their own named "added_rows"; forward gives cat(x W^T, x R^T) on the last
  // dim. Only for a Linear without bias (an lm_head).
  void add_rows(const Tensor& rows);
  const Variable& added_rows() const { return added_rows_; }
  int64_t out_features() const;
  // W with the added rows appended below it (no graph).
  Tensor full_weight() const;

 private:
  Variable weight_, bias_, added_rows_;
};

// ids [...] (int) -> rows of weight [V, C]: [..., C].
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, Generator& gen, double init_std = 0.02,
            DType dtype = DType::Float32);
  Variable forward(const Tensor& ids) const;
  const Variable& weight() const { return weight_; }

  // Vocabulary growth: rows R [n, dim] for ids V .. V+n-1, a parameter named "added_rows"
  // (the V old rows can stay frozen while R trains).
  void add_rows(const Tensor& rows);
  const Variable& added_rows() const { return added_rows_; }
  int64_t num_embeddings() const;
  // The tied output layer: h [..., dim] -> h W^T [..., num_embeddings()] (added rows last).
  // on_weight_read (optional) runs in backward after the last read of W and the added rows.
  Variable project(const Variable& h, std::function<void()> on_weight_read = nullptr) const;
  // W with the added rows appended below it (no graph).
  Tensor full_weight() const;

 private:
  Variable weight_, added_rows_;
};

// y = x / sqrt(mean(x^2) + eps) * w over the last dim.
class RMSNorm : public UnaryModule {
 public:
  RMSNorm(int64_t dim, double eps, DType dtype = DType::Float32);
  Variable forward(const Variable& x) const override;
  const Variable& weight() const { return weight_; }
  double eps() const { return eps_; }

 private:
  Variable weight_;
  double eps_;
};

// PyTorch's LayerNorm over the last dim, with weight and (optional) bias.
class LayerNorm : public UnaryModule {
 public:
  LayerNorm(int64_t dim, double eps, bool bias = true, DType dtype = DType::Float32);
  Variable forward(const Variable& x) const override;

 private:
  Variable weight_, bias_;
  double eps_;
};

// The config's norm key: "rmsnorm" or "layernorm" (with bias).
std::shared_ptr<UnaryModule> make_norm(const std::string& kind, int64_t dim, double eps,
                                       DType dtype = DType::Float32);

// Inverted dropout, active only in training mode. Draws from a shared
// generator so that a whole model's dropout is one reproducible stream.
class Dropout : public UnaryModule {
 public:
  Dropout(double p, std::shared_ptr<Generator> gen) : p_(p), gen_(std::move(gen)) {}
  Variable forward(const Variable& x) const override;

 private:
  double p_;
  std::shared_ptr<Generator> gen_;
};

}  // namespace ember::nn
