// safetensors reader (validating) and float32 writer.
#include "core/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/io/json_message.h"

namespace ember::apps {
namespace {

using nlohmann::json;
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

// The reference implementation's limit: larger headers are refused as malformed.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

uint64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

}  // namespace

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal: rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // subnormal half: mant * 2^-24, a normal float
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(bits);
}

float bfloat16_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::error_code ec;
  EMBER_CHECK(std::filesystem::is_regular_file(path, ec), path, ": no such safetensors file");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  EMBER_CHECK(!ec, path, ": cannot read the file size");
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), path, ": cannot open");
  EMBER_CHECK(file_size >= 8, path, ": not a safetensors file (", file_size,
              " bytes, shorter than the 8-byte header length)");
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EMBER_CHECK(n <= kMaxHeaderBytes && n <= file_size - 8, path,
              ": corrupt safetensors header length ", n, " (file has ", file_size, " bytes)");
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  EMBER_CHECK(in.good(), path, ": cannot read the safetensors header");
  json h;
  try {
    h = json::parse(header);
  } catch (const json::exception& e) {
    throw Error(path + ": safetensors header is not valid JSON: " + json_message(e.what()));
  }
  EMBER_CHECK(h.is_object(), path, ": safetensors header must be a JSON object");
  data_start_ = 8 + n;
  const uint64_t data_size = file_size - data_start_;
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") {
      EMBER_CHECK(v.is_object(), path, ": safetensors __metadata__ must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        EMBER_CHECK(s.is_string(), path, ": safetensors __metadata__ value of \"", k,
                    "\" is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string where = path + ": tensor \"" + name + "\"";
    EMBER_CHECK(
        v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
        where, ": header entry needs dtype, shape and data_offsets");
    SafetensorsEntry e;
    EMBER_CHECK(v["dtype"].is_string(), where, ": dtype must be a string");
    e.dtype = v["dtype"].get<std::string>();
    const uint64_t elem = dtype_bytes(e.dtype);
    EMBER_CHECK(elem > 0, where, ": unknown dtype \"", e.dtype, "\"");
    EMBER_CHECK(v["shape"].is_array(), where, ": shape must be an array");
    uint64_t numel = 1;
    for (const json& d : v["shape"]) {
      EMBER_CHECK(d.is_number_unsigned(), where, ": shape entries must be non-negative integers");
      const uint64_t s = d.get<uint64_t>();
      EMBER_CHECK(s == 0 || numel <= (uint64_t{1} << 62) / s, where, ": shape is too large");
      numel *= s;
      e.shape.push_back(static_cast<int64_t>(s));
    }
    const json& off = v["data_offsets"];
    EMBER_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                    off[1].is_number_unsigned(),
                where, ": data_offsets must be two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    EMBER_CHECK(e.begin <= e.end && e.end <= data_size, where, ": data_offsets [", e.begin, ", ",
                e.end, "] lie outside the file's ", data_size, " data bytes");
    EMBER_CHECK(e.end - e.begin == numel * elem, where, ": data_offsets span ", e.end - e.begin,
                " bytes but ", e.dtype, " ", shape_str(e.shape), " needs ", numel * elem);
    entries_[name] = std::move(e);
  }
  // The data section must be covered exactly: no overlaps, no holes.
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [name, e] : entries_) spans.emplace_back(e.begin, e.end);
  std::sort(spans.begin(), spans.end());
  uint64_t at = 0;
  for (const auto& [b, e] : spans) {
    EMBER_CHECK(b >= at, path, ": safetensors tensors overlap at data byte ", b);
    EMBER_CHECK(b == at, path, ": safetensors data has a hole at bytes [", at, ", ", b, ")");
    at = e;
  }
  EMBER_CHECK(at == data_size, path, ": safetensors file has ", data_size - at,
              " bytes after the last tensor");
}

Tensor SafetensorsFile::read(const std::string& name) const {
  auto it = entries_.find(name);
  EMBER_CHECK(it != entries_.end(), path_, ": no tensor \"", name, "\"");
  const SafetensorsEntry& e = it->second;
  EMBER_CHECK(e.dtype == "F32" || e.dtype == "F16" || e.dtype == "BF16" || e.dtype == "F64", path_,
              ": tensor \"", name, "\" has dtype ", e.dtype,
              "; only F32, F16, BF16 and F64 can be read as float32");
  std::vector<char> bytes(e.end - e.begin);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EMBER_CHECK(in.good() || bytes.empty(), path_, ": cannot read tensor \"", name, "\"");
  Tensor out = Tensor::empty(e.shape, DType::Float32);
  float* dst = out.data<float>();
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    const char* src = bytes.data();
    if (e.dtype == "F32") {
      std::memcpy(&dst[i], src + 4 * i, 4);
    } else if (e.dtype == "F64") {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      dst[i] = static_cast<float>(d);
    } else {
      uint16_t b;
      std::memcpy(&b, src + 2 * i, 2);
      dst[i] = e.dtype == "F16" ? half_to_float(b) : bfloat16_to_float(b);
    }
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const auto& [name, t] : tensors) {
    EMBER_CHECK(t.dtype() == DType::Float32, "write_safetensors: tensor \"", name,
                "\" is not float32");
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * 4;
    h[name] = {{"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file;
  file.reserve(8 + header.size() + at);
  const uint64_t n = header.size();
  file.append(reinterpret_cast<const char*>(&n), 8);
  file += header;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.contiguous();
    file.append(static_cast<const char*>(c.raw_data()), static_cast<size_t>(c.numel()) * 4);
  }
  write_file_atomically(path, file);
}

}  // namespace ember::apps
