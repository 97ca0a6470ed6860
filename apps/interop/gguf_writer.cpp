// GGUF v3 serialisation (gguf_writer.h): strings are a uint64 length and the bytes,
// arrays an element type, a uint64 count and the elements, all little-endian.
#include "apps/interop/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "core/error.h"
#include "core/io/atomic_file.h"

namespace ember::apps::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian");

// GGUF metadata value types.
enum : uint32_t { kInt32 = 5, kUint32 = 4, kFloat32 = 6, kBool = 7, kString = 8, kArray = 9 };

template <typename T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

uint64_t padded(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void Writer::begin_key(const std::string& key, uint32_t type) {
  EMBER_CHECK(std::find(keys_.begin(), keys_.end(), key) == keys_.end(), "GGUF key ", key, " given twice");
  keys_.push_back(key);
  put_string(kv_, key);
  put<uint32_t>(kv_, type);
  ++n_kv_;
}

void Writer::add_u32(const std::string& key, uint32_t v) { begin_key(key, kUint32); put(kv_, v); }
void Writer::add_i32(const std::string& key, int32_t v) { begin_key(key, kInt32); put(kv_, v); }
void Writer::add_f32(const std::string& key, float v) { begin_key(key, kFloat32); put(kv_, v); }
void Writer::add_bool(const std::string& key, bool v) {
  begin_key(key, kBool);
  put<uint8_t>(kv_, v ? 1 : 0);
}
void Writer::add_string(const std::string& key, const std::string& v) {
  begin_key(key, kString);
  put_string(kv_, v);
}
void Writer::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  begin_key(key, kArray);
  put<uint32_t>(kv_, kString);
  put<uint64_t>(kv_, v.size());
  for (const std::string& s : v) put_string(kv_, s);
}
void Writer::add_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  begin_key(key, kArray);
  put<uint32_t>(kv_, kInt32);
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put(kv_, x);
}

void Writer::add_tensor(TensorInfo t) {
  for (const TensorInfo& o : tensors_) EMBER_CHECK(o.name != t.name, "GGUF tensor ", t.name, " given twice");
  tensors_.push_back(std::move(t));
}

uint64_t Writer::data_bytes() const {
  uint64_t n = 0;
  for (const TensorInfo& t : tensors_) n = padded(n) + t.data.size();
  return n;
}

std::string Writer::header() const {
  std::string out = "GGUF";
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, n_kv_);
  out += kv_;
  uint64_t offset = 0;
  for (const TensorInfo& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(out, d);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    offset = padded(offset);
    put<uint64_t>(out, offset);
    offset += t.data.size();
  }
  out.resize(padded(out.size()), '\0');
  return out;
}

namespace {

bool write_all(std::FILE* f, const std::string& s) {
  return std::fwrite(s.data(), 1, s.size(), f) == s.size();
}

}  // namespace

void Writer::write_new_file(const std::string& path) const {
  remove_dead_temporaries(path, ".tmp.");  // of exports killed before they finished
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  EMBER_CHECK(f, "cannot write '", path, "': cannot create ", tmp, ": ", std::strerror(errno));
  bool ok = write_all(f, header());
  uint64_t offset = 0;
  for (const TensorInfo& t : tensors_) {
    ok = ok && write_all(f, std::string(padded(offset) - offset, '\0')) && write_all(f, t.data);
    offset = padded(offset) + t.data.size();
  }
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::filesystem::remove(tmp);
    EMBER_CHECK(false, "cannot write '", path, "': ", std::strerror(ok ? errno : err));
  }
  EMBER_CHECK(commit_new_file(tmp, path), "--out ", path, " already exists; ember export never "
              "replaces a file: choose a new path or remove it");
}

}  // namespace ember::apps::gguf
