// Autocast state and the per-region cache of bfloat16 parameter copies (see autocast.h).
#include "autograd/autocast.h"

#include <string>
#include <unordered_map>

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

struct AutocastState {
  DType dtype = DType::Float32;
  std::unordered_map<const void*, CachedCopy> cache;  // by data address
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
  CachedCopy& entry = s.cache[t.raw_data()];
  if (!entry.matches(t)) entry = CachedCopy{t, t.version(), kernels::to_bfloat16(t)};
  return entry.copy;
}

void autocast_forget(const Tensor& t) {
  AutocastState& s = state();
  if (s.cache.empty() || !t.defined() || t.storage()->data() == nullptr) return;
  auto it = s.cache.find(t.raw_data());
  if (it != s.cache.end() && it->second.source.shares_storage(t)) s.cache.erase(it);
}

}  // namespace ember
