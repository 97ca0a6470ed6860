// PackedWeight (kernels/packed_weights.h): conversion at load, the row gather, and the
// matmul of each type on its batch-invariant kernel (kernels/matmul_rows.h).
#include "core/kernels/packed_weights.h"

#include <cstring>

#include "core/error.h"
#include "core/kernels/bf16.h"
#include "core/kernels/matmul_bf16_tiles.h"
#include "core/kernels/matmul_q8.h"
#include "core/kernels/matmul_rows.h"

namespace ember::kernels {

const char* weight_type_name(WeightType type) {
  switch (type) {
    case WeightType::Float32: return "float32";
    case WeightType::BFloat16: return "bf16";
    case WeightType::Int8: return "int8";
  }
  return "?";
}

WeightType weight_type_named(const std::string& name) {
  for (WeightType t : {WeightType::Float32, WeightType::BFloat16, WeightType::Int8}) {
    if (name == weight_type_name(t)) return t;
  }
  throw Error("--weights: expected float32, bf16 or int8, got '" + name + "'");
}

PackedWeight::PackedWeight(const Tensor& w, WeightType type) : type_(type) {
  EMBER_CHECK(w.dim() == 2, "PackedWeight: a Linear's weight is 2-D, got ", w.dim(), " dimensions");
  N_ = w.size(0);
  K_ = w.size(1);
  Tensor f = w.dtype() == DType::Float32 ? w.contiguous() : w.to(DType::Float32).contiguous();
  if (type == WeightType::Float32) {
    f32_ = f;
    return;
  }
  const float* src = f.data<float>();
  if (type == WeightType::Int8) {
    pack_weights_q8(src, N_, K_, allocate<BlockQ8x8>(q8_groups(N_) * q8_blocks(K_)));
    return;
  }
  if (bf16_tiles_available()) {
    tiles_ = true;
    pack_tiles_bf16(src, N_, K_, allocate<uint16_t>(bf16_tiles_size(N_, K_)));
    return;
  }
  pack_rows_bf16(src, N_, K_, allocate<uint16_t>(N_ * K_));
}

template <class T>
T* PackedWeight::allocate(int64_t count) {
  packed_ = std::make_shared<Storage>(static_cast<size_t>(count) * sizeof(T));
  return static_cast<T*>(packed_->data());
}

int64_t PackedWeight::nbytes() const {
  switch (type_) {
    case WeightType::Float32: return N_ * K_ * 4;
    case WeightType::BFloat16:
    case WeightType::Int8: return static_cast<int64_t>(packed_->nbytes());
  }
  return 0;
}

void PackedWeight::matmul(int64_t M, const float* x, int64_t ldx, const float* bias, float* y,
                          int64_t ldy, int64_t n0, int64_t n1) const {
  EMBER_CHECK(0 <= n0 && n0 <= n1 && n1 <= N_, "PackedWeight::matmul: rows [", n0, ", ", n1,
              ") outside the ", N_, " rows of W");
  if (n0 == n1 || M <= 0) return;
  const float* b = bias ? bias + n0 : nullptr;
  if (type_ == WeightType::Float32) {
    matmul_rows(M, n1 - n0, K_, x, ldx, f32_.data<float>() + n0 * K_, K_, b, y + n0, ldy);
  } else if (bf16_tiles()) {
    matmul_bf16_tiles(M, K_, x, ldx, packed<uint16_t>(), bias, y, ldy, n0, n1);
  } else if (type_ == WeightType::BFloat16) {
    matmul_rows_bf16(M, n1 - n0, K_, x, ldx, packed<uint16_t>() + n0 * K_, K_, b, y + n0, ldy);
  } else {
    matmul_q8(M, K_, x, ldx, packed<BlockQ8x8>(), bias, y, ldy, n0, n1);
  }
}

void PackedWeight::row(int64_t n, float* out) const {
  EMBER_CHECK(0 <= n && n < N_, "PackedWeight: row ", n, " outside the ", N_, " rows");
  if (type_ == WeightType::Float32) {
    std::memcpy(out, f32_.data<float>() + n * K_, static_cast<size_t>(K_) * sizeof(float));
    return;
  }
  if (type_ == WeightType::Int8) {
    unpack_row_q8(packed<BlockQ8x8>(), K_, n, out);
    return;
  }
  if (bf16_tiles()) {
    unpack_row_tiles_bf16(packed<uint16_t>(), K_, n, out);
    return;
  }
  widen_row_bf16(packed<uint16_t>() + n * K_, K_, out);
}

Tensor PackedWeight::to_float32() const {
  Tensor out = Tensor::empty({N_, K_});
  for (int64_t n = 0; n < N_; ++n) row(n, out.data<float>() + n * K_);
  return out;
}

}  // namespace ember::kernels
