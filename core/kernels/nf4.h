// NF4 (4-bit NormalFloat) weights for QLoRA (docs/model.md#nf4-qlora): a float32 tensor
// flattened row-major, cut into blocks of 64, each element stored as the index
// of the nearest of the 16 NF4 codes to w / absmax(block); dequantized w =
// code * absmax. nf4-dq also stores the absmaxes as int8 (see Nf4Tensor).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::kernels {

constexpr int64_t kNf4Block = 64;     // weights per absmax
constexpr int64_t kNf4DqBlock = 256;  // absmaxes per int8 scale (nf4-dq)

// bitsandbytes' NF4 table, ascending: code index 7 is exactly 0, 0 and 15 are -1 and 1.
extern const std::array<float, 16> kNf4Codes;

// Index of the nearest code to v (|v| <= 1). Ties, v exactly halfway between two codes
// (midpoints computed in double), go to the lower code, as bitsandbytes' decision tree does.
uint8_t nf4_nearest_code(double v);

// The quantized form of one tensor.
// codes: ceil(numel / 2) bytes; element 2i in the HIGH nibble (bits 4-7) of byte i and
//   element 2i+1 in the low nibble (bitsandbytes' order); an odd numel leaves the last low
//   nibble 0.
// Absmax of block b (elements [64b, 64b + 64), the last block partial) = max |w| over the
//   block, float32. A block of zeros has absmax 0 and stores code 7 (the code 0): it
//   dequantizes to exactly 0 with no division, also under nf4-dq where the reconstructed
//   absmax need not be 0 (so does any w = 0 in any block).
// nf4: absmax holds the float32 absmaxes.
// nf4-dq: absmax is empty; m = absmax_mean (float32, the mean of all absmaxes); per block of
//   256 absmaxes (the last partial) the centred values c = absmax - m give
//   scale = max|c| / 127 (float32) and q = round(c / scale) (half away from zero, in int8);
//   a block of c all 0 has scale 0 and q 0. The absmax used is q * scale + m (float32).
//   Codes are chosen with the exact absmax, before its double quantization.
struct Nf4Tensor {
  Shape shape;
  std::vector<uint8_t> codes;
  std::vector<float> absmax;        // nf4
  std::vector<int8_t> absmax_q;     // nf4-dq
  std::vector<float> absmax_scale;  // nf4-dq, one per 256 absmaxes
  float absmax_mean = 0;            // nf4-dq
  // Elements per absmax: kNf4Block, or (a tensor-parallel shard cut by nf4_columns) a part of it.
  int64_t block = kNf4Block;

  int64_t numel() const { return shape_numel(shape); }
  int64_t num_blocks() const { return (numel() + block - 1) / block; }
  bool double_quant() const { return absmax.empty() && !absmax_q.empty(); }
  // The absmax dequantization multiplies by (the float32 one, or q * scale + m).
  float block_absmax(int64_t block) const;
  // Code index of element i.
  uint8_t code(int64_t i) const { return i % 2 == 0 ? codes[i / 2] >> 4 : codes[i / 2] & 15; }
  // Bytes of the stored form: codes, plus 4 per absmax (nf4) or 1 per absmax, 4 per
  // scale and 4 for the mean (nf4-dq). Shape not counted.
  int64_t nbytes() const;
};

// Quantizes a float32 tensor (any shape, any strides): code = nf4_nearest_code(double(w) /
// double(absmax)); double_quant gives nf4-dq.
Nf4Tensor nf4_quantize(const Tensor& w, bool double_quant = false);
// A tensor-parallel shard of a quantized 2-D tensor [out, in] (nn/tensor_parallel.h): rows
// [first, first + count) or columns [first, first + count), holding exactly the codes and
// absmaxes of those elements, so it dequantizes to the whole's dequantized values there, bit
// for bit. nf4-dq absmaxes are kept as the float32 values they dequantize to (a shard is nf4).
// Rows need their elements to start and end at block boundaries; columns need the blocks to lie
// in whole rows (64 divisible by in, the shard's blocks are then 64 count / in elements) or the
// shard's part of each row to be whole blocks. Otherwise an Error naming `what`, the shape and
// the block size.
Nf4Tensor nf4_rows(const Nf4Tensor& whole, int64_t first, int64_t count, const std::string& what);
Nf4Tensor nf4_columns(const Nf4Tensor& whole, int64_t first, int64_t count, const std::string& what);
// The whole tensor back, float32 or float64, in its shape.
Tensor nf4_dequantize(const Nf4Tensor& q, DType dtype = DType::Float32);
// Elements [begin, begin + count) of the flattened tensor, dequantized into out.
template <class T>
void nf4_dequantize_range(const Nf4Tensor& q, int64_t begin, int64_t count, T* out);

}  // namespace ember::kernels
