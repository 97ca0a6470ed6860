// TokenShard (mmap of one shard after checking its header against its size),
// list_shards and TokenDataset (shards in name order as one token stream).
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/token_shard.h"

namespace ember::data {
namespace fs = std::filesystem;

TokenShard::TokenShard(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  EMBER_CHECK(fd >= 0, "cannot open token shard '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(detail::concat("cannot stat token shard '", path, "': ", std::strerror(errno)));
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  if (bytes < kShardHeaderBytes) {
    ::close(fd);
    throw Error(detail::concat("token shard '", path, "' is truncated: ", bytes,
                               " bytes, less than its ", kShardHeaderBytes, "-byte header"));
  }
  map_ = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  EMBER_CHECK(map_ != MAP_FAILED, "cannot map token shard '", path, "': ", std::strerror(errno));
  map_bytes_ = bytes;
  int32_t header[3];
  std::memcpy(header, map_, sizeof header);
  auto fail = [&](auto... parts) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw Error(detail::concat("token shard '", path, "': ", parts...));
  };
  if (header[0] != kShardMagic)
    fail("wrong magic number ", header[0], " (expected ", kShardMagic, "): not an llm.c token shard");
  if (header[1] != 1 && header[1] != 2)
    fail("unsupported version ", header[1], " (1 = uint16 tokens, 2 = uint32 tokens)");
  if (header[2] < 0) fail("negative token count ", header[2], " in the header");
  width_ = header[1] == 1 ? 2 : 4;
  count_ = static_cast<uint64_t>(header[2]);
  const uint64_t body = bytes - kShardHeaderBytes;
  if (body != count_ * width_)
    fail("the header says ", count_, " tokens (", count_ * width_, " bytes) but the file holds ",
         body, " bytes after the header", body < count_ * width_ ? " (truncated)" : "");
  tokens_ = static_cast<const uint8_t*>(map_) + kShardHeaderBytes;
  ::madvise(map_, map_bytes_, MADV_WILLNEED);
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenShard::TokenShard(TokenShard&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      tokens_(o.tokens_),
      count_(o.count_),
      width_(o.width_) {
  o.map_ = nullptr;
}

template <class T>
void TokenShard::read(uint64_t start, size_t n, T* out) const {
  EMBER_CHECK(start + n <= count_, "token shard '", path_, "': reading tokens [", start, ", ",
              start + n, ") of ", count_);
  if (width_ == 2) {
    const auto* src = reinterpret_cast<const uint16_t*>(tokens_) + start;
    for (size_t k = 0; k < n; ++k) out[k] = static_cast<T>(src[k]);
  } else {
    const auto* src = reinterpret_cast<const uint32_t*>(tokens_) + start;
    for (size_t k = 0; k < n; ++k) out[k] = static_cast<T>(src[k]);
  }
}

std::vector<std::string> list_shards(const std::string& spec) {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    for (const auto& e : fs::directory_iterator(spec))
      if (e.is_regular_file() && e.path().extension() == ".bin") out.push_back(e.path().string());
    EMBER_CHECK(!out.empty(), "token dataset directory '", spec, "' holds no .bin shards");
  } else if (fs::exists(spec, ec)) {
    out.push_back(spec);
  } else {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i)
      if (fs::is_regular_file(g.gl_pathv[i], ec)) out.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    EMBER_CHECK(!out.empty(), "token dataset '", spec, "': no such file, and no shards match it");
  }
  std::sort(out.begin(), out.end());
  return out;
}

TokenDataset::TokenDataset(const std::string& spec) {
  offsets_.push_back(0);
  for (const auto& path : list_shards(spec)) {
    shards_.emplace_back(path);
    offsets_.push_back(offsets_.back() + shards_.back().size());
  }
}

template <class T>
void TokenDataset::read(uint64_t start, size_t n, T* out) const {
  EMBER_CHECK(start + n <= size(), "token dataset: reading tokens [", start, ", ", start + n,
              ") of ", size());
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), start);
  size_t s = static_cast<size_t>(it - offsets_.begin()) - 1;
  while (n > 0) {
    const uint64_t local = start - offsets_[s];
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, shards_[s].size() - local));
    shards_[s].read(local, take, out);
    out += take;
    start += take;
    n -= take;
    ++s;
  }
}

template void TokenShard::read(uint64_t, size_t, int32_t*) const;
template void TokenShard::read(uint64_t, size_t, int64_t*) const;
template void TokenShard::read(uint64_t, size_t, uint32_t*) const;
template void TokenDataset::read(uint64_t, size_t, int32_t*) const;
template void TokenDataset::read(uint64_t, size_t, int64_t*) const;
template void TokenDataset::read(uint64_t, size_t, uint32_t*) const;

}  // namespace ember::data
