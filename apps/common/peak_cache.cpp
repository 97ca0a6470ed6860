// The per-user cache of matmul peaks (see peak_cache.h): its key, its file's
// place, lookup and atomic update. Every failure to read is a miss and every
// failure to write is returned as text, never thrown.
#include "apps/common/peak_cache.h"

#include <omp.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/io/atomic_file.h"
#include "core/kernels/matmul.h"
#include "ember/version.h"

namespace ember::apps {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "ember matmul peak cache";
constexpr int kVersion = 1;
constexpr size_t kMaxEntries = 16;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// /proc/cpuinfo's first "model name" (x86), else "unknown".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? "unknown" : line.substr(begin);
  }
  return "unknown";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The cache's entries, or none when the file is missing, unreadable or not the cache's format.
json read_entries(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return json::array();
  std::stringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const auto has = [&](const char* name, const json& value) {
    const auto it = doc.find(name);
    return it != doc.end() && *it == value;  // compared, never converted: no type error
  };
  if (!doc.is_object() || !has("format", kFormat) || !has("version", kVersion))
    return json::array();
  const auto entries = doc.find("entries");
  return entries != doc.end() && entries->is_array() ? *entries : json::array();
}

// The entry as a CachedPeak, when it is one (a positive finite rate).
std::optional<CachedPeak> parse_entry(const json& e) {
  if (!e.is_object()) return std::nullopt;
  const auto flops = e.find("flops"), products = e.find("products");
  if (flops == e.end() || !flops->is_number() || products == e.end() ||
      !products->is_number_integer())
    return std::nullopt;
  CachedPeak p;
  p.flops = flops->get<double>();
  p.products = products->get<int>();
  if (!std::isfinite(p.flops) || p.flops <= 0) return std::nullopt;
  const auto text = [&](const char* name) {
    const auto it = e.find(name);
    return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  p.layout = text("layout");
  p.measured = text("measured");
  return p;
}

}  // namespace

json peak_cache_key(DType operands) {
  return {{"cpu", cpu_model()},
          {"EMBER_MAX_ISA", env_or_empty("EMBER_MAX_ISA")},
          {"ONEDNN_MAX_CPU_ISA", env_or_empty("ONEDNN_MAX_CPU_ISA")},
          {"onednn_isa", kernels::onednn_cpu_isa()},
          {"threads", omp_get_max_threads()},
          {"dtype", operands == DType::BFloat16 ? "bf16" : "float32"},
          {"ember", EMBER_VERSION},
          {"build", EMBER_BUILD_INFO}};
}

std::string peak_cache_path() {
  namespace fs = std::filesystem;
  const std::string xdg = env_or_empty("XDG_CACHE_HOME"), home = env_or_empty("HOME");
  fs::path dir;
  if (!xdg.empty() && fs::path(xdg).is_absolute()) {
    dir = fs::path(xdg) / "ember";
  } else if (!home.empty()) {
    dir = fs::path(home) / ".cache" / "ember";
  } else {
    return "";
  }
  return (dir / "matmul_peak.json").string();
}

std::optional<CachedPeak> find_cached_peak(const std::string& path, const json& key) {
  if (path.empty()) return std::nullopt;
  for (const json& e : read_entries(path)) {
    if (e.is_object() && e.contains("key") && e.at("key") == key) return parse_entry(e);
  }
  return std::nullopt;
}

std::string store_cached_peak(const std::string& path, const json& key, const CachedPeak& p) {
  if (path.empty()) return "neither XDG_CACHE_HOME nor HOME is set";
  json kept = json::array();
  for (json& e : read_entries(path)) {
    if (e.is_object() && e.contains("key") && e.at("key") != key && parse_entry(e))
      kept.push_back(std::move(e));
  }
  kept.push_back({{"key", key},
                  {"flops", p.flops},
                  {"products", p.products},
                  {"layout", p.layout},
                  {"measured", p.measured}});
  if (kept.size() > kMaxEntries) kept.erase(kept.begin(), kept.end() - kMaxEntries);
  const json doc = {{"format", kFormat}, {"version", kVersion}, {"entries", kept}};
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    write_file_atomically(path, doc.dump(2) + "\n");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

CachedPeak measure_peak_now(DType operands) {
  const MatmulPeak m = measure_peak(3, 4, operands);
  return {m.flops, m.products, m.layout, utc_now()};
}

}  // namespace ember::apps
