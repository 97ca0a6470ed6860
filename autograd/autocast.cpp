// Autocast state and the per-region cache of bfloat16 parameter copies (see autocast.h).
#include "autograd/autocast.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/kernels/bf16.h"

namespace ember {
namespace {

// One parameter's rounded copy; `source` keeps the storage alive, so its
// address cannot be reused by another tensor while the entry exists.
struct CachedCopy {
  Tensor source;
  uint64_t version = 0;
  Tensor copy;
  bool matches(const Tensor& t) const {
    return source.shares_storage(t) && source.raw_data() == t.raw_data() && source.shape() == t.shape() &&
           source.strides() == t.strides() && version == t.version();
  }
};

// A copy its writer published: holds no reference to the parameter's storage,
// only checks it is still the same storage, place, layout and version.
struct PublishedCopy {
  std::weak_ptr<Storage> storage;
  const void* data = nullptr;
  Shape shape, strides;
  uint64_t version = 0;
  Tensor copy;
  bool matches(const Tensor& t) const {
    return !storage.expired() && storage.lock() == t.storage() && data == t.raw_data() &&
           shape == t.shape() && strides == t.strides() && version == t.version();
  }
};

struct AutocastState {
  DType dtype = DType::Float32;
  std::unordered_map<const void*, CachedCopy> cache;          // by data address
  std::unordered_map<const void*, PublishedCopy> published;  // outlives regions
  std::unordered_set<const void*> rounded;                   // this region's parameters
};

AutocastState& state() {
  thread_local AutocastState s;
  return s;
}

}  // namespace

DType autocast_dtype() { return state().dtype; }

void set_autocast_dtype(DType dtype) {
  EMBER_CHECK(dtype == DType::Float32 || dtype == DType::BFloat16,
              "autocast: expected float32 or bfloat16, got ", dtype_name(dtype));
  AutocastState& s = state();
  if (dtype == DType::BFloat16 && s.dtype != DType::BFloat16) s.rounded.clear();  // a new region
  s.dtype = dtype;
  if (dtype == DType::Float32) s.cache.clear();
}

DType parse_autocast_dtype(const std::string& name, const char* option) {
  if (name == "float32") return DType::Float32;
  if (name == "bf16" || name == "bfloat16") return DType::BFloat16;
  throw Error(detail::concat(option, ": expected float32 or bf16, got '", name, "'"));
}

Tensor autocast_to_bfloat16(const Variable& v) {
  const Tensor& t = v.data();
  AutocastState& s = state();
  if (s.dtype != DType::BFloat16 || !v.is_leaf() || !v.requires_grad()) return kernels::to_bfloat16(t);
  s.rounded.insert(t.raw_data());
  const auto published = s.published.find(t.raw_data());
  if (published != s.published.end() && published->second.matches(t)) return published->second.copy;
  CachedCopy& entry = s.cache[t.raw_data()];
  if (!entry.matches(t)) entry = CachedCopy{t, t.version(), kernels::to_bfloat16(t)};
  return entry.copy;
}

void autocast_forget(const Tensor& t) {
  AutocastState& s = state();
  if (s.cache.empty() || !t.defined() || t.storage()->data() == nullptr) return;
  auto it = s.cache.find(t.raw_data());
  if (it != s.cache.end() && it->second.source.shares_storage(t)) s.cache.erase(it);
  auto pub = s.published.find(t.raw_data());
  if (pub != s.published.end() && pub->second.storage.lock() == t.storage()) s.published.erase(pub);
}

bool autocast_rounded(const Tensor& t) { return state().rounded.count(t.raw_data()) > 0; }

void publish_bfloat16_copy(const Tensor& t, const Tensor& copy) {
  EMBER_CHECK(copy.dtype() == DType::BFloat16 && copy.is_contiguous() && copy.shape() == t.shape(),
              "publish_bfloat16_copy: expected a contiguous bfloat16 copy of shape ", shape_str(t.shape()));
  state().published[t.raw_data()] = PublishedCopy{t.storage(), t.raw_data(), t.shape(), t.strides(), t.version(), copy};
}

void forget_bfloat16_copy(const Tensor& t) { state().published.erase(t.raw_data()); }

}  // namespace ember
