// Data-parallel figures, run under mpirun (or alone for W = 1):
//  1. all-reduce bandwidth per bucket size (blocking MPI_Allreduce and
//     MPI_Iallreduce + wait), as algorithm and bus bandwidth (nccl-tests' busbw);
//  2. with --model CONFIG: training steps (forward, backward with the bucketed
//     Reducer, clip, AdamW or ZeRO-1) on random tokens: tokens/s over all
//     ranks, and the overlap (communication hidden behind backward).
// Usage: [mpirun -np W] bench_allreduce [--reps N] [--max-mib M] [--model CONFIG.json
//        [--batch B] [--seq T] [--steps S] [--bucket-mib M] [--first-mib M] [--zero]
//        [--predict]]   (--predict: docs/scaling.md's step-time model for 2..64 nodes)
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "dist/consistency.h"
#include "dist/zero_adamw.h"
#include "nn/transformer.h"
#include "optim/adamw.h"

using namespace ember;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

static void bench_bandwidth(dist::Communicator& comm, int reps, int64_t max_bytes) {
  const int w = comm.world_size();
  if (comm.is_root()) {
    std::printf("all-reduce, float32, %d ranks (busbw = algbw * 2(W-1)/W)\n", w);
    std::printf("%12s %12s %12s %12s %12s\n", "bucket", "blocking us", "algbw GB/s", "busbw GB/s",
                "nonblk us");
  }
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 2) {
    Tensor t = Tensor::ones({bytes / 4});
    const int n =
        std::max(3, static_cast<int>(std::min<int64_t>(reps, (int64_t{256} << 20) / bytes)));
    std::vector<double> blocking, nonblocking;
    for (int i = 0; i < n + 1; ++i) {
      comm.barrier();
      apps::Stopwatch watch;
      comm.all_reduce(t);
      if (i > 0) blocking.push_back(comm.all_reduce(watch.seconds(), dist::ReduceOp::Max));
      comm.barrier();
      watch.restart();
      dist::Request r = comm.iall_reduce_sum(t);
      comm.wait(r);
      if (i > 0) nonblocking.push_back(comm.all_reduce(watch.seconds(), dist::ReduceOp::Max));
    }
    const double tb = median(blocking), tn = median(nonblocking);
    const double algbw = tb > 0 ? bytes / tb / 1e9 : 0;
    if (comm.is_root()) {
      char label[32];
      if (bytes >= (1 << 20)) {
        std::snprintf(label, sizeof label, "%lld MiB", static_cast<long long>(bytes >> 20));
      } else {
        std::snprintf(label, sizeof label, "%lld KiB", static_cast<long long>(bytes >> 10));
      }
      std::printf("%12s %12.1f %12.2f %12.2f %12.1f\n", label, tb * 1e6, algbw,
                  w > 1 ? algbw * 2.0 * (w - 1) / w : 0.0, tn * 1e6);
    }
  }
}

// The step-time model of docs/scaling.md for W nodes (one rank each): buckets
// become ready at a uniform byte rate through backward, the network carries
// one bucket at a time with a ring all-reduce, t(S) = 2(W-1) alpha + 2 (W-1)/W S / beta,
// and what is still in flight when backward ends is exposed.
static double modelled_exposed(const std::vector<int64_t>& bucket_bytes, double backward_s, int w,
                               double alpha, double beta) {
  int64_t total = 0;
  for (int64_t b : bucket_bytes) total += b;
  double done = 0;
  int64_t through = 0;
  for (int64_t b : bucket_bytes) {
    through += b;
    const double ready = backward_s * static_cast<double>(through) / static_cast<double>(total);
    done = std::max(done, ready) + 2.0 * (w - 1) * alpha + 2.0 * (w - 1) / w * b / beta;
  }
  return std::max(0.0, done - backward_s);
}

static void print_scaling_model(double step_s, double backward_s,
                                const std::vector<int64_t>& buckets) {
  struct Net {
    const char* name;
    double alpha, beta;  // latency (s), bandwidth (bytes/s)
  };
  const Net nets[] = {{"10 GbE (30 us)", 30e-6, 1.25e9},
                      {"25 GbE (15 us)", 15e-6, 3.1e9},
                      {"100 Gb/s IB (2 us)", 2e-6, 12.5e9}};
  std::printf("  model, one rank per node, step %.1f ms of compute (backward %.1f ms):\n",
              step_s * 1e3, backward_s * 1e3);
  std::printf("  %-20s", "nodes");
  for (int w = 2; w <= 64; w *= 2) std::printf(" %13d", w);
  std::printf("\n");
  for (const Net& net : nets) {
    std::printf("  %-20s", net.name);
    for (int w = 2; w <= 64; w *= 2) {
      const double t = step_s + modelled_exposed(buckets, backward_s, w, net.alpha, net.beta);
      std::printf("   %6.1f %3.0f%%", t * 1e3, 100 * step_s / t);
    }
    std::printf("\n");
  }
}

struct ModelRun {
  std::string config;
  int64_t batch = 8, seq = 256;
  int steps = 6;
  double bucket_mib = 25, first_mib = 1;
  bool zero = false;
  bool predict = false;  // print the multi-node model from this run's figures
};

static void bench_model(dist::Communicator& comm, const ModelRun& run) {
  const nn::ModelConfig cfg = nn::ModelConfig::from_file(run.config);
  nn::Transformer model(cfg, 1);
  const auto named = model.named_parameters();
  const auto params = model.parameters();
  dist::ReducerOptions ro;
  ro.bucket_bytes = static_cast<int64_t>(run.bucket_mib * (1 << 20));
  ro.first_bucket_bytes = static_cast<int64_t>(run.first_mib * (1 << 20));
  ro.zero = run.zero;
  dist::Reducer reducer(comm, params, ro);
  std::unique_ptr<optim::Optimizer> opt;
  if (run.zero) {
    opt = std::make_unique<dist::ZeroAdamW>(reducer, optim::decay_groups(named, 0.1));
  } else {
    opt = std::make_unique<optim::AdamW>(optim::decay_groups(named, 0.1));
  }
  const int64_t B = run.batch, T = run.seq;
  std::vector<double> step_s, backward_s, comm_s, wait_s, overlap;
  int64_t bytes = 0, buckets = 0;
  for (int s = 0; s < run.steps + 1; ++s) {
    const Tensor ids =
        Tensor::rand({B, T + 1}, 3 + comm.rank(), static_cast<uint64_t>(s) * B * (T + 1),
                     DType::Float64, 0, static_cast<double>(cfg.vocab_size))
            .to(DType::Int64);
    const Tensor x = ids.narrow(1, 0, T).contiguous(), y = ids.narrow(1, 1, T).contiguous();
    const apps::Stopwatch step_watch;
    opt->zero_grad();
    nn::LossTerms loss = model.loss(model.forward(x), y);
    const apps::Stopwatch backward_watch;
    loss.total.backward();
    const double bwd = backward_watch.seconds();
    reducer.finish();
    reducer.clip_grad_norm(1.0);
    opt->step(1e-4);
    const double step = comm.all_reduce(step_watch.seconds(), dist::ReduceOp::Max);
    if (s == 0) continue;  // warms caches and oneDNN primitives
    step_s.push_back(step);
    backward_s.push_back(bwd);
    comm_s.push_back(reducer.stats().comm_seconds);
    wait_s.push_back(reducer.stats().wait_seconds);
    overlap.push_back(reducer.stats().overlap());
    bytes = reducer.stats().bytes;
    buckets = reducer.stats().buckets;
  }
  dist::check_parameters_consistent(comm, params, run.steps);
  const double t = median(step_s), c = median(comm_s), wt = median(wait_s);
  if (comm.is_root()) {
    const int w = comm.world_size();
    std::printf("%s: %d rank(s) x %d thread(s), batch %lld x %lld per rank%s\n", run.config.c_str(),
                w, omp_get_max_threads(), static_cast<long long>(B), static_cast<long long>(T),
                run.zero ? ", ZeRO-1" : "");
    std::printf("  step %.1f ms (backward %.1f ms), %.0f tokens/s over all ranks\n", t * 1e3,
                median(backward_s) * 1e3, w * B * T / t);
    if (run.predict) {
      std::vector<int64_t> sizes;
      const int64_t elem = static_cast<int64_t>(dtype_size(reducer.flat().dtype()));
      for (const dist::Bucket& b : reducer.buckets()) sizes.push_back((b.end - b.begin) * elem);
      print_scaling_model(t, median(backward_s), sizes);
    }
    if (w > 1) {
      std::printf(
          "  gradients %.2f MB in %lld buckets: in flight %.2f ms, waited after backward "
          "%.2f ms, overlap %.0f%% (medians)\n",
          bytes / 1e6, static_cast<long long>(buckets), c * 1e3, wt * 1e3, 100 * median(overlap));
    }
  }
}

int main(int argc, char** argv) {
  dist::Communicator comm;
  try {
    dist::set_threads_per_rank(comm);
    int reps = 20;
    int64_t max_bytes = int64_t{64} << 20;
    ModelRun run;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const bool has = i + 1 < argc;
      if (a == "--reps" && has)
        reps = std::atoi(argv[++i]);
      else if (a == "--max-mib" && has)
        max_bytes = std::atoll(argv[++i]) << 20;
      else if (a == "--model" && has)
        run.config = argv[++i];
      else if (a == "--batch" && has)
        run.batch = std::atoll(argv[++i]);
      else if (a == "--seq" && has)
        run.seq = std::atoll(argv[++i]);
      else if (a == "--steps" && has)
        run.steps = std::atoi(argv[++i]);
      else if (a == "--bucket-mib" && has)
        run.bucket_mib = std::atof(argv[++i]);
      else if (a == "--first-mib" && has)
        run.first_mib = std::atof(argv[++i]);
      else if (a == "--zero")
        run.zero = true;
      else if (a == "--predict")
        run.predict = true;
      else
        throw Error("bench_allreduce: unknown option " + a);
    }
    if (run.config.empty()) {
      bench_bandwidth(comm, reps, max_bytes);
    } else {
      bench_model(comm, run);
    }
    return 0;
  } catch (const std::exception& e) {
    return comm.fail(e, "bench_allreduce: ");
  }
}
