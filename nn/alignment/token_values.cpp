// token_mask, token_values and tensor_of: the shape and 0/1 checks shared by RL's advantages and
// losses, in double.
#include "nn/alignment/token_values.h"

#include <string>

namespace ember::nn {

std::vector<double> token_values(const char* fn, const char* name, const Tensor& t,
                                 const Shape& shape) {
  EMBER_CHECK(t.defined() && t.shape() == shape, fn, ": ", name, " must be ", shape_str(shape),
              ", got ", t.defined() ? shape_str(t.shape()) : std::string("none"));
  return t.to(DType::Float64).to_vector<double>();
}

std::vector<double> token_mask(const char* fn, const Tensor& mask, const Shape& shape) {
  std::vector<double> m = token_values(fn, "the completion-token mask", mask, shape);
  const int64_t T = shape.size() == 2 ? shape[1] : 1;
  for (size_t i = 0; i < m.size(); ++i) {
    EMBER_CHECK(m[i] == 0 || m[i] == 1, fn, ": the completion-token mask holds ", m[i], " at [",
                static_cast<int64_t>(i) / T, ", ", static_cast<int64_t>(i) % T,
                "]; expected 0 or 1");
  }
  return m;
}

std::vector<double> token_mask(const char* fn, const Tensor& mask) {
  EMBER_CHECK(mask.defined() && mask.dim() == 2, fn,
              ": the completion-token mask must be [B, T], got ",
              mask.defined() ? shape_str(mask.shape()) : std::string("none"));
  return token_mask(fn, mask, mask.shape());
}

Tensor tensor_of(const std::vector<double>& v, const Shape& shape, DType dtype) {
  return Tensor::from_vector<double>(v, shape).to(dtype);
}

}  // namespace ember::nn
