// `ember bench`: training-step benchmark of the presets (dense-small and
// moe-small at B 8, T 256; gpt2-small at B 4, T 64; on request gpt2-small-1024,
// gpt2-small at B 8, T 1024: apps/bench/bench_cases.h) or of --config files.
// Prints, per config: ms/step (median and best of --steps after --warmup),
// tokens/s, model GFLOP/s, % of the matmul peak of --dtype (measured once per
// run), peak RSS, the floor (the step's FLOPs at the fastest measured rate,
// apps::floor_peak: the better of the float32 register-only FMA peak and the
// matmul peak, also measured once; what no implementation can beat on this
// machine), and the time split by phase and op family (the profiler is
// on during the timed steps; --profile prints its full tables). The header
// names the instruction set oneDNN runs. --json FILE
// writes every figure. Each config runs in a forked child so that its peak
// RSS (wait4's ru_maxrss) is its own; the parent itself computes nothing,
// since libgomp's thread pool does not survive a fork. --peak only measures
// the matmul peak and stores it in the cache ember train reads (peak_cache.h).
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "apps/bench/bench_cases.h"
#include "apps/bench/bench_runner.h"
#include "apps/cli/commands.h"
#include "apps/common/matmul_peak.h"
#include "apps/common/peak_cache.h"
#include "apps/cli/output_file.h"
#include "apps/common/stop_signals.h"
#include "autograd/autocast.h"
#include "core/error.h"
#include "apps/common/fma_peak.h"
#include "core/kernels/matmul.h"
#include "core/threads.h"
#include "core/io/atomic_file.h"
#include "dist/communicator.h"
#include "nn/sizing/model_stats.h"

namespace ember::apps {

namespace {

using nlohmann::json;

constexpr int kMaxThreads = 1024;  // libgomp crashes creating very many threads

struct BenchOptions {
  std::vector<std::string> presets, configs;
  int64_t batch_size = 0, seq_len = 0;  // 0: the config's default
  int64_t steps = 10, warmup = 2;
  int threads = 0;  // 0: OpenMP's default
  std::string json_path, dtype = "float32";
  bool profile = false, peak = false;
  uint64_t seed = 1337;
};

struct ChildResult {
  json result;
  double peak_rss_mb = 0;
};

// Runs fn in a forked child and returns the JSON it produced with the child's
// peak resident set; an exception in the child becomes an Error here.
ChildResult run_in_child(const std::string& what, const std::function<json()>& fn) {
  int fds[2];
  EMBER_CHECK(pipe(fds) == 0, "bench: pipe() failed");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  EMBER_CHECK(pid >= 0, "bench: fork() failed");
  if (pid == 0) {
    ember::apps::unblock_stop_signals();  // the child has no signal thread: Ctrl-C ends it
    close(fds[0]);
    std::string out;
    int code = 0;
    try {
      out = fn().dump();
    } catch (const std::exception& e) {
      out = json{{"error", e.what()}}.dump();
      code = 1;
    }
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    close(fds[1]);
    std::fflush(stdout);
    _exit(code);
  }
  close(fds[1]);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  rusage usage{};
  EMBER_CHECK(wait4(pid, &status, 0, &usage) == pid, "bench: ", what, ": wait4 failed");
  ChildResult r;
  r.result = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (r.result.is_object() && r.result.contains("error")) {
    throw Error("bench: " + what + ": " + r.result.at("error").get<std::string>());
  }
  EMBER_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && r.result.is_object(), "bench: ", what,
              ": the child process failed (status ", status, ")");
  r.peak_rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: KiB
  return r;
}

std::vector<BenchCase> bench_cases(const BenchOptions& o) {
  std::vector<std::string> presets = o.presets;
  if (presets.empty() && o.configs.empty()) presets = default_bench_cases();
  std::vector<BenchCase> cases;
  for (const std::string& p : presets) cases.push_back(bench_preset_case(p));
  for (const std::string& path : o.configs) {
    nn::ModelConfig cfg = nn::ModelConfig::from_file(path);
    cases.push_back({std::filesystem::path(path).stem().string(), cfg, 8, std::min<int64_t>(256, cfg.max_seq_len)});
  }
  for (BenchCase& c : cases) {
    if (o.batch_size > 0) c.batch_size = o.batch_size;
    if (o.seq_len > 0) c.seq_len = o.seq_len;
  }
  return cases;
}

// "forward 41.2% | backward 48.0% | ..." from a profile's phases or families, largest first.
std::string split_line(const json& group) {
  std::vector<std::pair<double, std::string>> parts;
  for (const auto& [name, v] : group.items()) {
    if (v.at("percent").get<double>() >= 0.05) parts.emplace_back(v.at("percent").get<double>(), name);
  }
  std::sort(parts.rbegin(), parts.rend());
  std::string out;
  char buf[64];
  for (const auto& [pct, name] : parts) {
    std::snprintf(buf, sizeof buf, "%s%s %.1f%%", out.empty() ? "" : " | ", name.c_str(), pct);
    out += buf;
  }
  return out;
}

// The options, each error naming its option, before anything runs.
void check_bench_options(const BenchOptions& o) {
  EMBER_CHECK(!dist::Communicator::launched_by_mpirun(), "ember bench runs in one process; run it without mpirun");
  EMBER_CHECK(o.steps > 0 && o.warmup >= 0, "--steps must be positive and --warmup non-negative");
  EMBER_CHECK(o.warmup <= INT64_MAX - o.steps, "--warmup ", o.warmup, " plus --steps ", o.steps,
              " overflows 64-bit integers");
  EMBER_CHECK(o.batch_size >= 0, "--batch-size must be positive (or 0: the default), got ", o.batch_size);
  EMBER_CHECK(o.seq_len >= 0, "--seq-len must be positive (or 0: the default), got ", o.seq_len);
  EMBER_CHECK(o.threads >= 0 && o.threads <= kMaxThreads, "--threads must be between 1 and ", kMaxThreads,
              " (or 0: OpenMP's default), got ", o.threads);
  if (!o.json_path.empty()) require_replaceable("--json", o.json_path, "a JSON", {"{"});
}

// Each case's sequence fits its model and its training fits in memory: checked before any
// child allocates (one line, not a crash).
void check_cases_fit(const std::vector<BenchCase>& cases) {
  for (const BenchCase& c : cases) {
    EMBER_CHECK(c.seq_len <= c.config.max_seq_len, c.name, ": --seq-len ", c.seq_len,
                " exceeds the model's max_seq_len ", c.config.max_seq_len);
    try {
      nn::require_fits_in_memory(nn::training_memory(c.config, c.batch_size, c.seq_len));
    } catch (const Error& e) {
      throw Error(detail::concat(c.name, " at --batch-size ", c.batch_size, " --seq-len ", c.seq_len, ": ", e.what()));
    }
  }
}

// The --json report's machine figures (from the peak child's result); the configs follow.
json report_header(const BenchOptions& o, const json& peak, const FloorPeak& floor) {
  return {{"threads", peak.at("threads").get<int>()},
          {"dtype", o.dtype},
          {"matmul_peak_gflops", peak.at("flops").get<double>() / 1e9},
          {"matmul_peak_products", peak.at("products")},
          {"matmul_peak_layout", peak.at("layout")},
          {"matmul_peak_layouts_gflops", peak.at("layouts_gflops")},
          {"onednn_isa", peak.at("onednn_isa").get<std::string>()},
          {"fma_peak_gflops", peak.at("fma_flops").get<double>() / 1e9},
          {"fma_peak_isa", peak.at("fma_isa")},
          {"floor_peak_gflops", floor.flops / 1e9},
          {"floor_peak", floor.source},
          {"configs", json::array()}};
}

// One case's table row, its phase and family split (and with --profile the full tables).
void print_case(const BenchCase& c, const json& j, double peak_rss_mb, bool profile) {
  std::printf("%-16s %4lld %5lld %10.1f %10.1f %10.0f %9.1f %6.1f%% %7.0f MB %9.1f\n", c.name.c_str(),
              static_cast<long long>(c.batch_size), static_cast<long long>(c.seq_len),
              j.at("ms_per_step_median").get<double>(), j.at("ms_per_step_best").get<double>(),
              j.at("tokens_per_s").get<double>(), j.at("gflops").get<double>(), j.at("mfu_percent").get<double>(),
              peak_rss_mb, j.at("floor_ms").get<double>());
  std::printf("  causal:   %.1f%% of the peak with causal attention as half the T x T square\n",
              j.at("mfu_causal_percent").get<double>());
  std::printf("  phases:   %s\n", split_line(j.at("profile").at("phases")).c_str());
  std::printf("  families: %s\n", split_line(j.at("profile").at("families")).c_str());
  if (profile) std::printf("%s", j.at("profile_table").get<std::string>().c_str());
  std::fflush(stdout);
}

// --peak: the matmul peak of --dtype at --threads, measured and stored in the cache that
// `ember train` reads (apps/common/peak_cache.h); nothing else runs, so no child is needed.
int measure_and_cache_peak(const BenchOptions& o, DType autocast) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const CachedPeak p = measure_peak_now(autocast);
  const std::string path = peak_cache_path();
  const std::string failed = store_cached_peak(path, peak_cache_key(autocast), p);
  const int threads = omp_get_max_threads();
  std::printf("matmul peak: %.1f GFLOP/s measured (%s, %d thread%s, best of %d 1024^3 products, %s)\n",
              p.flops / 1e9, o.dtype.c_str(), threads, threads == 1 ? "" : "s", p.products, p.layout.c_str());
  std::fflush(stdout);
  EMBER_CHECK(failed.empty(), "the matmul peak is not cached: ", failed);
  std::printf("cached in %s for ember train\n", path.c_str());
  return 0;
}

int run_bench(const BenchOptions& o) {
  check_bench_options(o);
  const DType autocast = parse_autocast_dtype(o.dtype);  // bf16: matmuls as in ember train --dtype bf16
  if (o.peak) return measure_and_cache_peak(o, autocast);
  const std::vector<BenchCase> cases = bench_cases(o);
  check_cases_fit(cases);
  auto set_threads = [&] {
    if (o.threads > 0) omp_set_num_threads(o.threads);
  };
  const ChildResult peak = run_in_child("matmul peak", [&] {
    set_threads();
    const MatmulPeak p = measure_peak(3, 4, autocast);
    json layouts = json::object();
    for (const PeakCandidate& c : p.candidates) layouts[c.layout] = c.flops / 1e9;
    return json{{"flops", p.flops},
                {"products", p.products},
                {"layout", p.layout},
                {"layouts_gflops", layouts},
                {"fma_flops", measure_float32_fma_peak()},
                {"fma_isa", apps::fma_peak_isa(DType::Float32)},
                {"onednn_isa", kernels::onednn_cpu_isa()},
                {"threads", omp_get_max_threads()}};
  });
  const double peak_flops = peak.result.at("flops").get<double>();
  const double fma_flops = peak.result.at("fma_flops").get<double>();
  const FloorPeak floor = floor_peak(autocast, peak_flops, fma_flops);
  const std::string onednn_isa = peak.result.at("onednn_isa").get<std::string>();
  const int threads = peak.result.at("threads").get<int>();
  std::printf("ember bench: %d threads, %s, %lld timed steps after %lld warm-up; oneDNN ISA %s; %s matmul peak "
              "%.1f GFLOP/s (best of %d 1024^3 products, %s); float32 FMA peak %.1f GFLOP/s (%s register-only "
              "multiply-adds); floor at the %s peak\n",
              threads, o.dtype.c_str(), static_cast<long long>(o.steps), static_cast<long long>(o.warmup),
              onednn_isa.c_str(), autocast == DType::BFloat16 ? "bf16" : "float32", peak_flops / 1e9,
              peak.result.at("products").get<int>(), peak.result.at("layout").get<std::string>().c_str(),
              fma_flops / 1e9,
              peak.result.at("fma_isa").get<std::string>().c_str(), floor.source);
  std::printf("%-16s %4s %5s %10s %10s %10s %9s %7s %10s %9s\n", "config", "B", "T", "ms median", "ms best",
              "tokens/s", "GFLOP/s", "%peak", "peak RSS", "floor ms");
  std::fflush(stdout);
  json report = report_header(o, peak.result, floor);
  const BenchRunOptions run{o.steps, o.warmup, o.seed, autocast};
  for (const BenchCase& c : cases) {
    ChildResult r = run_in_child(c.name, [&] {
      set_threads();
      pin_threads();  // in the child: the parent's mask stays whole for the next child
      return run_bench_case(c, run, peak_flops, floor.flops);
    });
    json& j = r.result;
    j["peak_rss_mb"] = r.peak_rss_mb;
    print_case(c, j, r.peak_rss_mb, o.profile);
    j.erase("profile_table");
    report["configs"].push_back(j);
  }
  if (!o.json_path.empty()) {
    write_file_atomically(o.json_path, report.dump(2) + "\n");  // a full disk leaves no partial file
  }
  return 0;
}

}  // namespace

CommandRunner add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Time full training steps (forward, backward, clip, AdamW) of the "
                                              "presets on random tokens: ms/step, tokens/s, MFU, peak RSS, profile");
  sub->add_option("--preset", o->presets, "preset to run (repeatable; default: dense-small, moe-small, gpt2-small; also "
                                  "gpt2-small-1024: gpt2-small at B 8, T 1024)");
  sub->add_option("--config", o->configs, "model config JSON to run (repeatable)")->check(CLI::ExistingFile);
  sub->add_option("--batch-size", o->batch_size, "rows per step (default: 8, gpt2-small 4)");
  sub->add_option("--seq-len", o->seq_len, "tokens per row (default: 256, gpt2-small 64)");
  sub->add_option("--steps", o->steps, "timed steps per config")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "untimed steps first")->capture_default_str();
  sub->add_option("--threads", o->threads, "OpenMP threads (default: OMP_NUM_THREADS or all cores)");
  sub->add_option("--json", o->json_path, "write every figure to this JSON file");
  sub->add_option("--dtype", o->dtype, "matmul precision of forward and backward: float32 or bf16 (float32 weights, grads, AdamW)")->capture_default_str()->check(CLI::IsMember({"float32", "bf16"}));
  sub->add_option("--seed", o->seed, "seed of the weights and tokens")->capture_default_str();
  CLI::Option* profile = sub->add_flag("--profile", o->profile, "print the profiler's full tables per config");
  sub->add_flag("--peak", o->peak, "only measure the matmul peak of --dtype at --threads and store it in the "
                                   "cache ember train reads (docs/cli.md)")
      ->excludes(profile)
      ->excludes("--preset")
      ->excludes("--config")
      ->excludes("--json")
      ->excludes("--batch-size")
      ->excludes("--seq-len")
      ->excludes("--steps")
      ->excludes("--warmup")
      ->excludes("--seed");
  return [o] { return run_bench(*o); };
}

}  // namespace ember::apps
