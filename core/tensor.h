// core::Tensor: a typed, strided view (shape, strides, offset) of a shared
// Storage. Data only: no autograd here (see autograd/variable.h). View
// operations never copy; contiguous() copies only when the layout needs it.
// Shape letters in comments follow PyTorch order, outermost first.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/storage.h"

namespace ember {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
// Row-major (C-order) strides of a shape, in elements.
Shape contiguous_strides(const Shape& shape);
// Shape two shapes broadcast to (NumPy rules); an Error naming both otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b);

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // --- factories -----------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::Float32);
  static Tensor ones(const Shape& shape, DType dtype = DType::Float32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::Float32);
  static Tensor scalar(double value, DType dtype = DType::Float32);  // 0-dim
  // [start, start + step, ...) below end, like torch.arange.
  static Tensor arange(double start, double end, double step = 1, DType dtype = DType::Int64);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }
  // Uniform [lo, hi) and normal(mean, std): element i uses Philox counter offset + i.
  static Tensor rand(const Shape& shape, uint64_t seed, uint64_t offset = 0,
                     DType dtype = DType::Float32, double lo = 0, double hi = 1);
  static Tensor randn(const Shape& shape, uint64_t seed, uint64_t offset = 0,
                      DType dtype = DType::Float32, double mean = 0, double std = 1);
  // Same, drawing from a Generator and advancing it by numel.
  static Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::Float32,
                     double lo = 0, double hi = 1);
  static Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::Float32,
                      double mean = 0, double std = 1);
  // A tensor over memory it does not own (release is called when the last view dies).
  static Tensor from_blob(void* data, const Shape& shape, DType dtype,
                          std::function<void(void*)> release);

  // --- metadata ------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  // Size of dimension d; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // Version of the underlying storage; bumped by every in-place write.
  uint64_t version() const { return storage_ ? storage_->version() : 0; }
  void bump_version() const {
    if (storage_) storage_->bump_version();
  }
  // True when both view the same storage.
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

  // Pointer to element 0 of this view. T must match dtype().
  template <class T>
  T* data() const {
    EMBER_CHECK(dtype_of<T>() == dtype_, "Tensor::data: tensor is ", dtype_name(dtype_),
                " but ", dtype_name(dtype_of<T>()), " was requested");
    return static_cast<T*>(storage_->data()) + offset_;
  }
  void* raw_data() const {
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
  }

  // --- views (no copy) ------------------------------------------------------
  // Same elements, new shape (one -1 is inferred). Needs a compatible layout.
  Tensor view(const Shape& shape) const;
  // view() when the layout allows it, otherwise a contiguous copy.
  Tensor reshape(const Shape& shape) const;
  Tensor flatten() const { return reshape({numel()}); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  // Elements start .. start+length-1 of dimension d.
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  // Python-style slice [start:end:step] of dimension d (negative indices allowed).
  Tensor slice(int64_t d, int64_t start, int64_t end, int64_t step = 1) const;
  // Index i of dimension d, which is removed.
  Tensor select(int64_t d, int64_t i) const;
  // Broadcast size-1 dims (stride 0) to shape; -1 keeps a size.
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t d) const;
  Tensor squeeze() const;  // all size-1 dims
  Tensor unsqueeze(int64_t d) const;
  // Shares storage with a new shape/stride/offset (checked against the storage size).
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;

  // --- copies ----------------------------------------------------------------
  Tensor contiguous() const;  // *this when already contiguous
  Tensor clone() const;       // always a new contiguous tensor
  Tensor to(DType dtype) const;

  // --- in-place writes (bump the version) ----------------------------------
  // (const like torch::Tensor: the handle is unchanged, the elements are written.)
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0); }
  // Copies src (broadcast to this shape, cast to this dtype) into this view.
  const Tensor& copy_(const Tensor& src) const;

  // --- element access --------------------------------------------------------
  // Element at a full index, converted to double (any dtype).
  double at(const std::vector<int64_t>& index) const;
  void set(const std::vector<int64_t>& index, double value) const;
  // The single element of a one-element tensor.
  double item() const;
  template <class T>
  std::vector<T> to_vector() const;  // elements in row-major order

  std::string to_string(int64_t max_per_dim = 6) const;

 private:
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);
  int64_t wrap_dim(int64_t d, int64_t ndim_extra = 0) const;
  int64_t element_offset(const std::vector<int64_t>& index) const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::Float32;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace ember
