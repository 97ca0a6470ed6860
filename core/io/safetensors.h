// The safetensors format (Hugging Face): an 8-byte little-endian u64 header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [b, e]},
// "__metadata__": {str: str}} (padded with spaces), then the tensors' raw
// little-endian bytes, offsets relative to the end of the header.
// The reader checks everything before trusting it (header length, JSON shape,
// known dtypes, sizes matching shapes, offsets inside the file, no overlaps or
// holes): a corrupt file is one clear Error naming the file, never a crash.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/tensor.h"

namespace ember::apps {

struct SafetensorsEntry {
  std::string dtype;  // "F32", "F16", "BF16", ...
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Reads and validates the header (not the data).
  explicit SafetensorsFile(const std::string& path);
  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }
  // The tensor as float32 (from F32, F16, BF16 or F64); an Error for other dtypes.
  Tensor read(const std::string& name) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes float32 tensors (as F32) atomically; names in map order.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// IEEE half and bfloat16 bit patterns to float (exact).
float half_to_float(uint16_t bits);
float bfloat16_to_float(uint16_t bits);

}  // namespace ember::apps
