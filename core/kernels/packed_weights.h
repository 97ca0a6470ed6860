// The linear weights of inference in the type `--weights` picks (docs/performance.md#weight-types):
// float32 (the tensor itself), bfloat16 (each weight rounded to nearest-even, kernels/bf16.h) or
// int8 (GGUF's Q8_0 blocks of 32 along the input, kernels/matmul_q8.h), converted once at load.
// Each type's product is exact on its stored weights up to float32 rounding (int8: on its
// activation blocks too; bf16 on AMX tiles: on the activations rounded to bfloat16 too).
// PackedWeight::matmul is batch-invariant for every type: one fixed sequence of operations per
// output that depends on K alone (kernels/matmul_rows.h, matmul_q8.h, matmul_bf16_tiles.h).
// bf16 takes AMX tiles where kernels::bf16_tiles_available() holds when the weight is
// converted, else the float32 order of matmul_rows over the widened weights.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/kernels/matmul_q8.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace ember::kernels {

enum class WeightType { Float32, BFloat16, Int8 };

// "float32", "bf16" or "int8"; the option value of WeightType.
const char* weight_type_name(WeightType type);
// The type by its option value; an Error naming the choices otherwise.
WeightType weight_type_named(const std::string& name);

// A Linear's weight W [N, K] in one WeightType.
class PackedWeight {
 public:
  PackedWeight() = default;
  // w: float32 [N, K] (any layout; a contiguous float32 w is shared, not copied, for Float32).
  PackedWeight(const Tensor& w, WeightType type);

  WeightType type() const { return type_; }
  int64_t rows() const { return N_; }
  int64_t cols() const { return K_; }
  // Bytes W takes in this type (what a decode step streams).
  int64_t nbytes() const;

  // y[m * ldy + n] = sum_k x[m * ldx + k] W[n, k] (+ bias[n]) for m < M and n in [n0, n1)
  // (bias indexed by n; pass n0 = 0, n1 = rows() for all). A row's outputs are bit-identical
  // whatever M, the other rows and [n0, n1) are (the thread split never changes them).
  void matmul(int64_t M, const float* x, int64_t ldx, const float* bias, float* y, int64_t ldy,
              int64_t n0, int64_t n1) const;
  void matmul(int64_t M, const float* x, int64_t ldx, const float* bias, float* y, int64_t ldy) const {
    matmul(M, x, ldx, bias, y, ldy, 0, N_);
  }
  // Row n of W as the float32 values the matmul multiplies by (the embedding gather; int8:
  // each weight's qs * d).
  void row(int64_t n, float* out) const;
  // The whole of W as those float32 values [N, K] (what a reference computes with).
  Tensor to_float32() const;
  // True for bf16 on AMX tiles (its products round x to bfloat16 too).
  bool bf16_tiles() const { return tiles_; }

 private:
  // The packed bytes, count elements of T, from the caching allocator (core/allocator.h):
  // blocks of 2 MiB or more on transparent huge pages, as tensors' are, so a decode step that
  // streams the weights does not walk a page table every 4 KiB (one stream read 25-26 GB/s
  // on small pages, 29.5-30 on huge ones, this 2-core VM).
  template <class T>
  T* allocate(int64_t count);
  template <class T>
  const T* packed() const { return static_cast<const T*>(packed_->data()); }

  WeightType type_ = WeightType::Float32;
  int64_t N_ = 0, K_ = 0;
  Tensor f32_;  // Float32
  // BFloat16: N * K bits, row-major, each row in the pair order (matmul_rows.h); or on AMX, the
  // tiles of kernels/matmul_bf16_tiles.h (tiles_ true). Int8: Q8_0 blocks, 8 rows interleaved
  // (kernels/matmul_q8.h).
  std::shared_ptr<Storage> packed_;
  bool tiles_ = false;
};

}  // namespace ember::kernels
