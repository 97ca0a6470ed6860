// The matmul peak MFU divides by, measured once per machine and kept in a
// per-user cache file ($XDG_CACHE_HOME/ember/matmul_peak.json, else
// ~/.cache/ember/; format in docs/formats.md), one entry per key: the CPU
// model, the ISA caps, the thread count, the dtype and ember's version and build.
// A missing, unreadable or corrupt cache is a miss; a failed write never fails a run.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "apps/common/matmul_peak.h"
#include "core/dtype.h"

namespace ember::apps {

// What a measured peak depends on, for the current process (OpenMP's thread count as set now).
nlohmann::json peak_cache_key(DType operands);

// The cache file: $XDG_CACHE_HOME/ember/matmul_peak.json when XDG_CACHE_HOME is an absolute
// path, else $HOME/.cache/ember/matmul_peak.json; "" when neither is set (no cache).
std::string peak_cache_path();

struct CachedPeak {
  double flops = 0;  // FLOP/s
  int products = 0;  // how many 1024^3 products it was the best of
  std::string layout, measured;  // "A B" or "A B^T"; UTC time, "2026-12-06 01:20 UTC"
};

// The entry for key, or nothing (no file, unreadable, not the cache's format, no valid entry).
std::optional<CachedPeak> find_cached_peak(const std::string& path, const nlohmann::json& key);

// Stores p under key (replacing its entry; at most 16 entries, the oldest dropped), written
// atomically; entries of a corrupt file are dropped. Returns "" or why the file was not written.
std::string store_cached_peak(const std::string& path, const nlohmann::json& key,
                              const CachedPeak& p);

// The peak `ember train` divides by: measured (measure_peak(3, 4, operands)), as a CachedPeak
// with the current time.
CachedPeak measure_peak_now(DType operands);

}  // namespace ember::apps
