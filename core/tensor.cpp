// Tensor: factories, views, copies and element access.
#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/strided_loop.h"

namespace ember {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, "shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset,
               DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype) {}

// --- factories ----------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int64_t s : shape) EMBER_CHECK(s >= 0, "Tensor::empty: negative size in shape ", shape_str(shape));
  auto storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype));
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) { return full(shape, 0, dtype); }
Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(double start, double end, double step, DType dtype) {
  EMBER_CHECK(step != 0, "Tensor::arange: step must be non-zero");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  Tensor t = empty({n}, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  EMBER_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "Tensor::from_vector: ",
              values.size(), " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, const Shape&);

Tensor Tensor::rand(const Shape& shape, uint64_t seed, uint64_t offset, DType dtype, double lo,
                    double hi) {
  Tensor t = empty(shape, dtype);
  const int64_t n = t.numel();
  dispatch_float(dtype, "Tensor::rand", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const auto r = philox4x32(seed, offset + static_cast<uint64_t>(i));
      const double u = uniform_double(r[0], r[1]);
      p[i] = static_cast<T>(lo + (hi - lo) * u);
    }
  });
  return t;
}

// Box-Muller on two uniforms of counter offset + i; 1 - u keeps log away from 0.
Tensor Tensor::randn(const Shape& shape, uint64_t seed, uint64_t offset, DType dtype, double mean,
                     double std) {
  Tensor t = empty(shape, dtype);
  const int64_t n = t.numel();
  dispatch_float(dtype, "Tensor::randn", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const auto r = philox4x32(seed, offset + static_cast<uint64_t>(i));
      const double u1 = 1.0 - uniform_double(r[0], r[1]);
      const double u2 = uniform_double(r[2], r[3]);
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      p[i] = static_cast<T>(mean + std * z);
    }
  });
  return t;
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, DType dtype, double lo, double hi) {
  const uint64_t first = gen.advance(static_cast<uint64_t>(shape_numel(shape)));
  return rand(shape, gen.seed, first, dtype, lo, hi);
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, DType dtype, double mean, double std) {
  const uint64_t first = gen.advance(static_cast<uint64_t>(shape_numel(shape)));
  return randn(shape, gen.seed, first, dtype, mean, std);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype,
                         std::function<void(void*)> release) {
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(data, nbytes, std::move(release));
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

// --- metadata -------------------------------------------------------------------

int64_t Tensor::wrap_dim(int64_t d, int64_t ndim_extra) const {
  const int64_t n = dim() + ndim_extra;
  EMBER_CHECK(d >= -n && d < std::max<int64_t>(n, 1), "dimension ", d,
              " is out of range for a tensor of shape ", shape_str(shape_));
  return d < 0 ? d + n : d;
}

int64_t Tensor::size(int64_t d) const { return shape_[wrap_dim(d)]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d)]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

// --- views ------------------------------------------------------------------------

static Shape infer_shape(const Shape& shape, int64_t numel, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      EMBER_CHECK(infer < 0, "view: only one dimension can be -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(out[i] >= 0, "view: invalid size in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known > 0 && numel % known == 0, "view: shape ", shape_str(shape),
                " is invalid for input of shape ", shape_str(from));
    out[infer] = numel / known;
  }
  EMBER_CHECK(shape_numel(out) == numel, "view: shape ", shape_str(shape),
              " is invalid for input of shape ", shape_str(from), " (", numel, " elements)");
  return out;
}

// Strides for viewing (shape, strides) as new_shape without a copy, or empty
// when impossible (PyTorch's computeStride: match runs of contiguous dims).
static bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape,
                         Shape& out) {
  out.assign(new_shape.size(), 0);
  if (shape_numel(shape) == 0 || shape.empty()) {  // empty, or a 0-dim single element
    out = contiguous_strides(new_shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor Tensor::view(const Shape& shape) const {
  const Shape s = infer_shape(shape, numel(), shape_);
  Shape st;
  EMBER_CHECK(view_strides(shape_, strides_, s, st), "view: shape ", shape_str(s),
              " is not compatible with the layout of a tensor of shape ", shape_str(shape_),
              " and strides ", shape_str(strides_), "; use reshape()");
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape s = infer_shape(shape, numel(), shape_);
  Shape st;
  if (view_strides(shape_, strides_, s, st)) return Tensor(storage_, s, st, offset_, dtype_);
  return contiguous().view(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: ", dims.size(),
              " dims given for a tensor of shape ", shape_str(shape_));
  Shape s(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i]);
    EMBER_CHECK(!seen[d], "permute: dimension ", d, " repeated in ", shape_str(dims));
    seen[d] = true;
    s[i] = shape_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0);
  d1 = wrap_dim(d1);
  Shape s = shape_, st = strides_;
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d);
  EMBER_CHECK(start >= 0 && length >= 0 && start + length <= shape_[d], "narrow: range [", start,
              ", ", start + length, ") is outside dimension ", d, " of shape ", shape_str(shape_));
  Shape s = shape_;
  s[d] = length;
  return Tensor(storage_, s, strides_, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d);
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape_, st = strides_;
  s[d] = (end - start + step - 1) / step;
  st[d] = strides_[d] * step;
  return Tensor(storage_, s, st, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::select(int64_t d, int64_t i) const {
  d = wrap_dim(d);
  if (i < 0) i += shape_[d];
  EMBER_CHECK(i >= 0 && i < shape_[d], "select: index ", i, " is out of range for dimension ", d,
              " of shape ", shape_str(shape_));
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, s, st, offset_ + i * strides_[d], dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  EMBER_CHECK(shape.size() >= shape_.size(), "expand: cannot expand shape ", shape_str(shape_),
              " to fewer dimensions ", shape_str(shape));
  const size_t lead = shape.size() - shape_.size();
  Shape s(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      EMBER_CHECK(shape[i] >= 0, "expand: size -1 is not allowed for a new dimension");
      s[i] = shape[i];
      st[i] = 0;
      continue;
    }
    const int64_t cur = shape_[i - lead];
    const int64_t want = shape[i] == -1 ? cur : shape[i];
    EMBER_CHECK(cur == want || cur == 1, "expand: shape ", shape_str(shape_), " cannot expand to ",
                shape_str(shape));
    s[i] = want;
    st[i] = cur == want ? strides_[i - lead] : 0;
  }
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d);
  if (shape_[d] != 1) return *this;
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::squeeze() const {
  Shape s, st;
  for (int64_t d = 0; d < dim(); ++d) {
    if (shape_[d] == 1) continue;
    s.push_back(shape_[d]);
    st.push_back(strides_[d]);
  }
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, 1);
  Shape s = shape_, st = strides_;
  const int64_t inner = d < dim() ? strides_[d] * shape_[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, inner);
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  EMBER_CHECK(shape.size() == strides.size(), "as_strided: shape ", shape_str(shape),
              " and strides ", shape_str(strides), " differ in length");
  int64_t max_off = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    EMBER_CHECK(shape[i] >= 0 && strides[i] >= 0, "as_strided: negative size or stride");
    if (shape[i] > 0) max_off += (shape[i] - 1) * strides[i];
  }
  const int64_t capacity = static_cast<int64_t>(storage_->nbytes() / dtype_size(dtype_));
  EMBER_CHECK(shape_numel(shape) == 0 || (offset >= 0 && max_off < capacity),
              "as_strided: view reaches element ", max_off, " of a storage holding ", capacity);
  return Tensor(storage_, shape, strides, offset, dtype_);
}

// --- copies --------------------------------------------------------------------------

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype);
  out.copy_(*this);
  return out;
}

const Tensor& Tensor::fill_(double value) const {
  bump_version();
  dispatch_all(dtype_, [&](auto tag) {
    using T = decltype(tag);
    T* p = data<T>();
    const T v = static_cast<T>(value);
    strided_rows<1>(shape_, {strides_}, [&](auto off, int64_t n, auto st) {
      T* q = p + off[0];
      if (st[0] == 1) {
        std::fill(q, q + n, v);
      } else {
        for (int64_t i = 0; i < n; ++i) q[i * st[0]] = v;
      }
    });
  });
  return *this;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  EMBER_CHECK(src.defined(), "copy_: source tensor is undefined");
  const Tensor s = src.expand(shape_);
  bump_version();
  dispatch_all(dtype_, [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_all(s.dtype(), [&](auto src_tag) {
      using S = decltype(src_tag);
      D* out = data<D>();
      const S* in = s.data<S>();
      strided_rows<2>(shape_, {strides_, s.strides()}, [&](auto off, int64_t n, auto st) {
        D* o = out + off[0];
        const S* x = in + off[1];
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<D>(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * st[0]] = static_cast<D>(x[i * st[1]]);
        }
      });
    });
  });
  return *this;
}

// --- element access ---------------------------------------------------------------------

int64_t Tensor::element_offset(const std::vector<int64_t>& index) const {
  EMBER_CHECK(static_cast<int64_t>(index.size()) == dim(), "index ", shape_str(index),
              " has the wrong number of dimensions for shape ", shape_str(shape_));
  int64_t off = offset_;
  for (size_t d = 0; d < index.size(); ++d) {
    int64_t i = index[d] < 0 ? index[d] + shape_[d] : index[d];
    EMBER_CHECK(i >= 0 && i < shape_[d], "index ", shape_str(index), " is out of range for shape ",
                shape_str(shape_));
    off += i * strides_[d];
  }
  return off;
}

double Tensor::at(const std::vector<int64_t>& index) const {
  const int64_t off = element_offset(index);
  return dispatch_all(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(static_cast<const T*>(storage_->data())[off]);
  });
}

void Tensor::set(const std::vector<int64_t>& index, double value) const {
  const int64_t off = element_offset(index);
  bump_version();
  dispatch_all(dtype_, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(storage_->data())[off] = static_cast<T>(value);
  });
}

double Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: tensor of shape ", shape_str(shape_), " has ", numel(),
              " elements, not 1");
  return dispatch_all(dtype_, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(*data<T>());
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor c = to(dtype_of<T>()).contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int32_t> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;

// --- printing -------------------------------------------------------------------------------

static void print_rec(std::ostream& out, const Tensor& t, std::vector<int64_t>& idx, int64_t d,
                      int64_t max_per_dim) {
  if (d == t.dim()) {
    const double v = t.at(idx);
    if (is_floating(t.dtype())) {
      out << std::setprecision(6) << v;
    } else {
      out << static_cast<int64_t>(v);
    }
    return;
  }
  out << '[';
  const int64_t n = t.size(d);
  for (int64_t i = 0; i < n; ++i) {
    if (n > max_per_dim && i == max_per_dim / 2) {
      out << "..., ";
      i = n - max_per_dim / 2;
    }
    idx[d] = i;
    print_rec(out, t, idx, d + 1, max_per_dim);
    if (i + 1 < n) out << ", ";
  }
  out << ']';
}

std::string Tensor::to_string(int64_t max_per_dim) const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(";
  std::vector<int64_t> idx(dim());
  print_rec(out, *this, idx, 0, std::max<int64_t>(max_per_dim, 2));
  out << ", shape=" << shape_str(shape_) << ", dtype=" << dtype_name(dtype_) << ')';
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.to_string(); }

}  // namespace ember
