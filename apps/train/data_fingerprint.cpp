// Data fingerprints (see data_fingerprint.h): file list from the shard or
// corpus rules of the data layer; hash = CRC-32C (core/io/crc32c.h) of the bytes read.
#include "apps/train/data_fingerprint.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/train/data_prep.h"
#include "apps/train/run_paths.h"
#include "core/io/crc32c.h"
#include "core/error.h"
#include "data/corpus.h"
#include "data/token_shard.h"

namespace ember::apps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// All bytes of the file when `samples` is 0 (or the file is small); else
// `samples` evenly spread 1 MiB blocks and the last one.
std::string file_hash(const std::string& path, uint64_t size, uint64_t samples) {
  constexpr uint64_t kBlock = uint64_t{1} << 20;
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), path, ": cannot read the data file");
  std::vector<char> buf(kBlock);
  uint32_t h = 0;
  auto read_at = [&](uint64_t offset, uint64_t n) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    EMBER_CHECK(static_cast<uint64_t>(in.gcount()) == n, path, ": cannot read the data file");
    h = crc32c_extend(h, buf.data(), n);
  };
  if (samples == 0 || size <= (samples + 1) * kBlock) {
    for (uint64_t at = 0; at < size; at += kBlock) read_at(at, std::min(kBlock, size - at));
  } else {
    for (uint64_t k = 0; k < samples; ++k) read_at((size - kBlock) / samples * k, kBlock);
    read_at(size - kBlock, kBlock);
  }
  char text[16];
  std::snprintf(text, sizeof text, "%08" PRIx32, h);
  return text;
}

std::vector<std::string> files_of(const std::string& spec) {
  return is_shard_spec(spec) ? data::list_shards(spec) : data::list_corpus_files({spec});
}

}  // namespace

json data_fingerprint(const std::string& data, const std::string& val_data) {
  std::vector<std::pair<std::string, uint64_t>> files;
  uint64_t total = 0;
  for (const std::string& spec : {data, val_data}) {
    if (spec.empty()) continue;
    for (const std::string& f : files_of(spec)) {
      std::error_code ec;
      const uint64_t size = fs::file_size(f, ec);
      EMBER_CHECK(!ec, f, ": cannot read the data file: ", ec.message());
      files.emplace_back(f, size);
      total += size;
    }
  }
  // Up to 1 GiB every byte; beyond, about 256 MiB read in all (1 to 64 blocks of 1 MiB per file).
  constexpr uint64_t kWhole = uint64_t{1} << 30, kBudgetBlocks = 256;
  const uint64_t samples =
      total <= kWhole ? 0 : std::clamp<uint64_t>(kBudgetBlocks / std::max<size_t>(files.size(), 1), 1, 64);
  json result = json::array();
  for (const auto& [f, size] : files) {
    result.push_back({{"file", f}, {"bytes", size}, {"hash", file_hash(f, size, samples)}});
  }
  return result;
}

std::string describe_data_change(const json& before, const json& now) {
  for (size_t i = 0; i < std::max(before.size(), now.size()); ++i) {
    if (i >= now.size()) return before[i].value("file", std::string()) + " is gone";
    const std::string file = now[i].value("file", std::string());
    if (i >= before.size()) return file + " is new";
    if (before[i] == now[i]) continue;
    const std::string was = before[i].value("file", std::string());
    // The same file by another name: runs store their data paths absolute now, older ones
    // relative (to the folder they started in).
    if (!same_path(was, file)) return detail::concat(file, " in place of ", was);
    if (before[i].value("bytes", uint64_t{0}) == now[i].value("bytes", uint64_t{0}) &&
        before[i].value("hash", std::string()) == now[i].value("hash", std::string()))
      continue;
    const uint64_t bytes = now[i].value("bytes", uint64_t{0}), was_bytes = before[i].value("bytes", uint64_t{0});
    if (bytes != was_bytes) return detail::concat(file, ": ", bytes, " bytes, was ", was_bytes);
    return file + ": its content changed (same size, another hash)";
  }
  return "";
}

}  // namespace ember::apps
