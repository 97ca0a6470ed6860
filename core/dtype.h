// Element types of a Tensor and the dispatch helpers that turn a runtime
// DType into a C++ type: dispatch_float(dt, "op", [&](auto tag) { using T = decltype(tag); ... }).
// BFloat16 is storage only: the operand type of the mixed-precision matmul
// (kernels/bf16.h converts, kernels::matmul multiplies with float32 output);
// no other kernel reads it, and the dispatch helpers reject it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace ember {

enum class DType : uint8_t { Float32, Float64, Int32, Int64, BFloat16 };

constexpr size_t dtype_size(DType dt) {
  return dt == DType::BFloat16 ? 2 : (dt == DType::Float32 || dt == DType::Int32) ? 4 : 8;
}
constexpr const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}
// The float types kernels compute in (not the storage-only BFloat16).
constexpr bool is_floating(DType dt) { return dt == DType::Float32 || dt == DType::Float64; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }

// Calls f with a value of the C++ type of a floating dtype.
template <class F>
decltype(auto) dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  throw Error(detail::concat(op, ": expected a float32 or float64 tensor, got ", dtype_name(dt)));
}

// Calls f with a value of the C++ type of any dtype.
template <class F>
decltype(auto) dispatch_all(DType dt, F&& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::BFloat16: break;
  }
  throw Error(detail::concat("expected a float32, float64, int32 or int64 tensor, got ", dtype_name(dt),
                             " (bfloat16 tensors are matmul operands only)"));
}

// Calls f with a value of the C++ type of an integer dtype (index tensors).
template <class F>
decltype(auto) dispatch_index(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    default: break;
  }
  throw Error(detail::concat(op, ": expected an int32 or int64 index tensor, got ", dtype_name(dt)));
}

}  // namespace ember
