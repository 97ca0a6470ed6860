// `ember train`'s matmul peak and MFU (docs/cli.md, Progress of `ember train`):
// the peak is measured once and cached per key (a second run reads it; another
// key, a corrupt file or `ember bench --peak` measure again; an unwritable cache
// never fails a run), the summary's MFU is the steps' FLOPs over their time over
// the peak (computed here from metrics.jsonl), and no MFU exceeds 100%. Each test
// points XDG_CACHE_HOME at its own folder, never at the user's cache.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "tiny_train.h"
#include "scoped_env.h"

namespace fs = std::filesystem;
using nlohmann::json;
using ember::testing::CliRun;
using ember::testing::read_text;
using ember::testing::run_ember;
using ember::testing::TempDir;

using ember::testing::ScopedEnv;

namespace {

// A tiny model and corpus in dir; the arguments of `ember train` for `steps` steps into dir/out.
std::string tiny_train(const TempDir& dir, const std::string& out, int steps = 3) {
  return ember::testing::tiny_train_args(dir, out) + " --log-every 1 --steps " + std::to_string(steps);
}

CliRun train(const TempDir& dir, const std::string& out, int steps = 3) {
  const CliRun r = run_ember(tiny_train(dir, out, steps));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  return r;
}

bool measured(const CliRun& r) { return r.out.find("matmul peak: ") != std::string::npos; }

json read_json(const std::string& path) { return json::parse(read_text(path)); }

// The cache file's modification time in nanoseconds.
long long mtime_ns(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

// Sets every cached entry's peak to flops.
void set_cached_flops(const std::string& path, double flops) {
  json cache = read_json(path);
  for (json& e : cache.at("entries")) e["flops"] = flops;
  std::ofstream(path) << cache.dump(2);
}

std::vector<json> metrics(const TempDir& dir, const std::string& out) {
  std::vector<json> records;
  std::istringstream lines(read_text(dir / (out + "/metrics.jsonl")));
  for (std::string line; std::getline(lines, line);) records.push_back(json::parse(line));
  return records;
}

// The summary's "mean MFU X% of ... Y GFLOP/s": {X, Y}.
std::pair<double, double> summary_mfu(const std::string& out) {
  std::smatch m;
  const std::regex line(R"(mean MFU ([0-9.]+)% of the [a-z0-9' ]*?([0-9.]+) GFLOP/s)");
  REQUIRE(std::regex_search(out, m, line));
  return {std::stod(m[1]), std::stod(m[2])};
}

// Every step's MFU (progress lines and metrics.jsonl) is at most 100%, and the summary's is
// the steps' FLOPs over their summed time over the last step's peak.
void check_mfu(const CliRun& r, const std::vector<json>& records) {
  REQUIRE(!records.empty());
  double flops = 0, seconds = 0;
  for (const json& m : records) {
    CHECK(m.at("mfu").get<double>() <= 1.0);
    CHECK(m.at("mfu").get<double>() > 0);
    flops += m.at("flops").get<double>();
    seconds += m.at("ms_per_step").get<double>() / 1e3;
  }
  const double peak = records.back().at("peak_flops").get<double>();
  const auto [mfu, gflops] = summary_mfu(r.out);
  CHECK(mfu == Approx(100 * flops / seconds / peak).margin(0.051));
  CHECK(gflops == Approx(peak / 1e9).margin(0.051));
  const std::regex line_mfu(R"(\| MFU ([0-9.]+)% \|)");
  int lines = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line_mfu), end; it != end; ++it, ++lines)
    CHECK(std::stod((*it)[1]) <= 100.0);
  CHECK(lines == static_cast<int>(records.size()));
}

}  // namespace

TEST_CASE("the matmul peak is measured by the first run, cached, and read by the next", "[cli][mfu]") {
  const TempDir dir("mfu_cache");
  const ScopedEnv cache_home("XDG_CACHE_HOME", (dir / "cache").c_str());
  const std::string cache = dir / "cache/ember/matmul_peak.json";
  const CliRun first = train(dir, "first");
  CHECK(measured(first));
  CHECK(first.out.find("cached in " + cache) != std::string::npos);
  REQUIRE(fs::exists(cache));
  const json written = read_json(cache);
  REQUIRE(written.at("entries").size() == 1);
  CHECK(written.at("entries")[0].at("key").at("dtype") == "float32");
  const std::string before = read_text(cache);
  const long long mtime = mtime_ns(cache);

  const CliRun second = train(dir, "second");
  CHECK_FALSE(measured(second));
  CHECK(read_text(cache) == before);
  CHECK(mtime_ns(cache) == mtime);
  CHECK(second.out.find("cached in " + cache) != std::string::npos);

  // The figure used is the cache's: an implausibly high one shows in the summary as it is.
  set_cached_flops(cache, 1e15);
  const CliRun third = train(dir, "third");
  CHECK_FALSE(measured(third));
  CHECK(summary_mfu(third.out).second == Approx(1e6));
  check_mfu(third, metrics(dir, "third"));
}

TEST_CASE("another thread count, ISA cap or dtype measures again, in an entry of its own", "[cli][mfu]") {
  const TempDir dir("mfu_key");
  const ScopedEnv cache_home("XDG_CACHE_HOME", (dir / "cache").c_str());
  const std::string cache = dir / "cache/ember/matmul_peak.json";
  const ScopedEnv one("OMP_NUM_THREADS", "1");
  CHECK(measured(train(dir, "one")));
  CHECK_FALSE(measured(train(dir, "one_again")));
  {
    const ScopedEnv two("OMP_NUM_THREADS", "2");
    CHECK(measured(train(dir, "two")));
  }
  {
    const ScopedEnv cap("EMBER_MAX_ISA", "generic");
    CHECK(measured(train(dir, "generic")));
  }
  const CliRun bf16 = run_ember(tiny_train(dir, "bf16") + " --dtype bf16");
  REQUIRE(bf16.code == 0);
  CHECK(measured(bf16));
  const json entries = read_json(cache).at("entries");
  REQUIRE(entries.size() == 4);
  CHECK(entries[0].at("key").at("threads") == 1);
  CHECK(entries[1].at("key").at("threads") == 2);
  CHECK(entries[2].at("key").at("EMBER_MAX_ISA") == "generic");
  CHECK(entries[3].at("key").at("dtype") == "bf16");
  CHECK_FALSE(measured(train(dir, "one_last")));  // the first entry is still there
}

TEST_CASE("a corrupt peak cache is measured again and replaced", "[cli][mfu]") {
  const TempDir dir("mfu_corrupt");
  const ScopedEnv cache_home("XDG_CACHE_HOME", (dir / "cache").c_str());
  const std::string cache = dir / "cache/ember/matmul_peak.json";
  fs::create_directories(dir.path / "cache/ember");
  for (const std::string& bad :
       {std::string("{\"format\": \"ember matmul peak cache\", \"vers"), std::string("[1, 2, 3]"),
        std::string("\x01\xff garbage"),
        std::string(R"({"format": 7, "version": "one"})"),
        std::string(R"({"format": "ember matmul peak cache", "version": 1, "entries": {"a": 1}})")}) {
    std::ofstream(cache, std::ios::binary) << bad;
    const CliRun r = train(dir, "run" + std::to_string(bad.size()));
    CHECK(measured(r));
    CHECK(r.err.empty());
    CHECK(read_json(cache).at("entries").size() == 1);
  }
  // An entry whose figure is not a positive number is no entry.
  set_cached_flops(cache, -1);
  CHECK(measured(train(dir, "negative")));
  CHECK(read_json(cache).at("entries")[0].at("flops").get<double>() > 0);
}

TEST_CASE("an unwritable peak cache costs one note, never the run", "[cli][mfu]") {
  const TempDir dir("mfu_unwritable");
  dir.write("file", "a file where the cache folder would be");
  const ScopedEnv cache_home("XDG_CACHE_HOME", (dir / "file").c_str());
  const CliRun r = train(dir, "run");
  CHECK(measured(r));
  CHECK(r.out.find("cached in") == std::string::npos);
  CHECK(r.err.starts_with("ember: note: the matmul peak is not cached ("));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.out.find("mean MFU ") != std::string::npos);
}

TEST_CASE("a step faster than the cached peak raises it: no MFU above 100%", "[cli][mfu]") {
  const TempDir dir("mfu_raise");
  const ScopedEnv cache_home("XDG_CACHE_HOME", (dir / "cache").c_str());
  const std::string cache = dir / "cache/ember/matmul_peak.json";
  train(dir, "first");
  set_cached_flops(cache, 1e6);  // 1 MFLOP/s: every step beats it
  const CliRun r = train(dir, "low", 6);
  const std::vector<json> records = metrics(dir, "low");
  check_mfu(r, records);
  CHECK(r.out.find("of the fastest step's") != std::string::npos);
  CHECK(r.out.find("above the float32 matmul peak 0.0 GFLOP/s") != std::string::npos);
  CHECK(r.out.find("measured low") != std::string::npos);
  // The peak the summary divides by is the fastest step's rate.
  double fastest = 0;
  for (const json& m : records)
    fastest = std::max(fastest, m.at("flops").get<double>() / (m.at("ms_per_step").get<double>() / 1e3));
  CHECK(records.back().at("peak_flops").get<double>() == Approx(fastest).epsilon(1e-9));
}

TEST_CASE("ember bench --peak measures and caches the peak that ember train reads", "[cli][mfu]") {
  const TempDir dir("mfu_bench");
  const ScopedEnv cache_home("XDG_CACHE_HOME", (dir / "cache").c_str());
  const std::string cache = dir / "cache/ember/matmul_peak.json";
  const CliRun bench = run_ember("bench --peak --threads 1");
  INFO(bench.out << bench.err);
  REQUIRE(bench.code == 0);
  CHECK(bench.out.find("matmul peak: ") != std::string::npos);
  CHECK(bench.out.find("cached in " + cache) != std::string::npos);
  REQUIRE(read_json(cache).at("entries").size() == 1);
  const ScopedEnv one("OMP_NUM_THREADS", "1");
  CHECK_FALSE(measured(train(dir, "run")));
  // It replaces the entry (again measured, not added).
  REQUIRE(run_ember("bench --peak --threads 1").code == 0);
  CHECK(read_json(cache).at("entries").size() == 1);
  CHECK(run_ember("bench --peak --preset dense-small").code == 2);
}
