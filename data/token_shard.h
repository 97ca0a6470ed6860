// llm.c token shards (docs/formats.md#token-shards-bin): a 256 x int32 header ([0] = 20240520,
// [1] = 1 for uint16 tokens or 2 for uint32, [2] = count), then the tokens.
// ShardWriter writes one atomically; TokenShard maps one after checking it;
// TokenDataset is a file, a folder's *.bin or a glob, in name order, as one stream.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ember::data {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// Bytes per token for a vocabulary: 2 when every id fits in uint16, else 4.
inline size_t shard_token_bytes(size_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

class ShardWriter {
 public:
  // Tokens are uint16 when vocab_size <= 65536, else uint32. The file appears
  // at path only when close() succeeds (it is written to path + ".tmp" first).
  ShardWriter(std::string path, size_t vocab_size);
  ~ShardWriter();  // without close(): removes the temporary file
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void write(std::span<const uint32_t> tokens);
  void close();
  uint64_t count() const { return count_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  size_t vocab_size_;
  size_t width_;
  std::FILE* file_ = nullptr;
  uint64_t count_ = 0;
  std::vector<uint8_t> buffer_;
};

// Writes tokens as one shard file.
void write_shard(const std::string& path, std::span<const uint32_t> tokens, size_t vocab_size);

class TokenShard {
 public:
  // Maps the file; an Error naming it when the header or size is wrong.
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&&) = delete;
  TokenShard(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return count_; }
  size_t token_bytes() const { return width_; }  // 2 or 4
  uint32_t operator[](uint64_t i) const {
    return width_ == 2 ? reinterpret_cast<const uint16_t*>(tokens_)[i]
                       : reinterpret_cast<const uint32_t*>(tokens_)[i];
  }
  // out[k] = token start + k for k < n (start + n <= size()).
  template <class T>
  void read(uint64_t start, size_t n, T* out) const;

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint8_t* tokens_ = nullptr;
  uint64_t count_ = 0;
  size_t width_ = 2;
};

// The shard files a dataset spec names: a file, a directory (its *.bin files)
// or a glob, in name order. An Error when it names none.
std::vector<std::string> list_shards(const std::string& spec);

class TokenDataset {
 public:
  explicit TokenDataset(const std::string& spec);
  size_t num_shards() const { return shards_.size(); }
  const TokenShard& shard(size_t i) const { return shards_[i]; }
  uint64_t size() const { return offsets_.back(); }  // tokens in all shards
  // Tokens [start, start + n) of the concatenated stream (may span shards).
  template <class T>
  void read(uint64_t start, size_t n, T* out) const;

 private:
  std::vector<TokenShard> shards_;
  std::vector<uint64_t> offsets_;  // offsets_[i]: first token of shard i; back(): total
};

}  // namespace ember::data
