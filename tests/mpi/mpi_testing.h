// Shared by the MPI tests: the process's one Communicator (made by
// mpi_main.cpp), a tiny seeded Transformer, and a per-rank batch.
// Under mpirun each test runs on every rank; without it, on world size 1.
// Use CHECK, not REQUIRE, before collectives: a rank that leaves a test early
// would leave the others waiting (the CTest TIMEOUT turns that into a failure).
#pragma once
#include <memory>

#include "dist/communicator.h"
#include "nn/transformer.h"

namespace ember::testing {

dist::Communicator& comm();

inline nn::ModelConfig tiny_config() {
  return nn::ModelConfig::from_json(R"({"vocab_size": 40, "d_model": 16, "n_layers": 2,
      "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 32, "qk_norm": true, "max_seq_len": 16,
      "z_loss_coef": 1e-4})");
}

// ids [B, T + 1] of rank r at micro-step u: different on every rank and step.
inline Tensor tiny_batch(int rank, int micro_step, int64_t B = 2, int64_t T = 8) {
  return Tensor::rand({B, T + 1}, 100 + rank, static_cast<uint64_t>(micro_step) * 1000,
                      DType::Float64, 0, 40)
      .to(DType::Int64);
}

// Mean-cross-entropy total loss of a model on a [B, T + 1] batch.
inline Variable tiny_loss(const nn::Transformer& model, const Tensor& ids) {
  const int64_t T = ids.size(1) - 1;
  const Tensor x = ids.narrow(1, 0, T).contiguous(), y = ids.narrow(1, 1, T).contiguous();
  return model.loss(model.forward(x), y).total;
}

}  // namespace ember::testing
