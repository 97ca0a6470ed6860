// SHA-256 (FIPS 180-4): the digest of a fine-tune's base checkpoint (root attr
// base_sha256, docs/formats.md#fine-tune-checkpoints). Digests are returned as 64 lowercase hex
// characters; a file is read in chunks, never whole.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember {

// Incremental hashing: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string hex_digest();  // finishes the hash; the object is spent afterwards

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(const void* data, size_t n);
std::string sha256_hex(const std::string& bytes);
// Errors name the file when it cannot be opened or read.
std::string sha256_file(const std::string& path);

}  // namespace ember
