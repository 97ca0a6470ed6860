// ShardWriter and write_shard: llm.c shard files, written to a temporary name
// and renamed into place on close, so a reader never sees half a shard.
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/io/atomic_file.h"
#include "data/token_shard.h"

namespace ember::data {

ShardWriter::ShardWriter(std::string path, size_t vocab_size)
    : path_(std::move(path)),
      tmp_(path_ + ".tmp"),
      vocab_size_(vocab_size),
      width_(shard_token_bytes(vocab_size)) {
  EMBER_CHECK(vocab_size > 0, "shard '", path_, "': vocabulary size must be positive");
  file_ = std::fopen(tmp_.c_str(), "wb");
  EMBER_CHECK(file_, "cannot write shard '", path_, "': ", std::strerror(errno));
  const std::vector<int32_t> header(kShardHeaderInts, 0);  // the real one is written by close()
  EMBER_CHECK(std::fwrite(header.data(), 4, kShardHeaderInts, file_) == kShardHeaderInts,
              "cannot write shard '", path_, "': ", std::strerror(errno));
}

ShardWriter::~ShardWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(tmp_.c_str());
  }
}

void ShardWriter::write(std::span<const uint32_t> tokens) {
  EMBER_CHECK(file_, "shard '", path_, "' is already closed");
  EMBER_CHECK(count_ + tokens.size() <= INT32_MAX, "shard '", path_,
              "': more than 2^31 - 1 tokens (the header's count is an int32)");
  buffer_.resize(tokens.size() * width_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t t = tokens[i];
    EMBER_CHECK(t < vocab_size_, "shard '", path_, "': token id ", t,
                " is outside the vocabulary of ", vocab_size_);
    if (width_ == 2) {
      const auto v = static_cast<uint16_t>(t);
      std::memcpy(&buffer_[2 * i], &v, 2);
    } else {
      std::memcpy(&buffer_[4 * i], &t, 4);
    }
  }
  EMBER_CHECK(std::fwrite(buffer_.data(), 1, buffer_.size(), file_) == buffer_.size(),
              "cannot write shard '", path_, "': ", std::strerror(errno));
  count_ += tokens.size();
}

void ShardWriter::close() {
  EMBER_CHECK(file_, "shard '", path_, "' is already closed");
  std::vector<int32_t> header(kShardHeaderInts, 0);
  header[0] = kShardMagic;
  header[1] = width_ == 2 ? 1 : 2;
  header[2] = static_cast<int32_t>(count_);
  const bool ok = std::fseek(file_, 0, SEEK_SET) == 0 &&
                  std::fwrite(header.data(), 4, kShardHeaderInts, file_) == kShardHeaderInts &&
                  std::fflush(file_) == 0;
  const int err = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok || !closed) {
    std::remove(tmp_.c_str());
    throw Error(detail::concat("cannot write shard '", path_, "': ", std::strerror(ok ? errno : err)));
  }
  commit_temporary_file(tmp_, path_);  // fsync, rename, fsync of the folder
}

void write_shard(const std::string& path, std::span<const uint32_t> tokens, size_t vocab_size) {
  ShardWriter w(path, vocab_size);
  w.write(tokens);
  w.close();
}

}  // namespace ember::data
