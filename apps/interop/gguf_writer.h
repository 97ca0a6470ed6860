// A GGUF v3 file writer (the format ggml's specification defines): the little-endian header, metadata
// key/values, tensor infos and the tensor data, each tensor's offset a multiple of the
// alignment (general.alignment, 32). The file is written to a temporary beside the
// target and renamed into place only when complete.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember::apps::gguf {

// GGML tensor types this writer stores.
enum class TensorType : uint32_t { F32 = 0, Q8_0 = 8, BF16 = 30 };
constexpr uint64_t kAlignment = 32;

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml's order: ne[0] the contiguous (innermost) dimension
  TensorType type = TensorType::F32;
  std::string data;          // the tensor's bytes in that type
};

class Writer {
 public:
  // Metadata, in the order added (keys must be unique; a repeat is an Error).
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_tensor(TensorInfo t);

  // Everything before the tensor data: header, metadata, tensor infos, padding.
  std::string header() const;
  // Writes bytes() to `path` through a temporary in the same folder; never replaces a file
  // (an Error when path exists, with nothing left behind).
  void write_new_file(const std::string& path) const;

  uint64_t data_bytes() const;
  int64_t tensor_count() const { return static_cast<int64_t>(tensors_.size()); }

 private:
  void begin_key(const std::string& key, uint32_t type);
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<std::string> keys_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace ember::apps::gguf
