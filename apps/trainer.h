// `ember train`: the training loop of SPEC.md sections 4-6 and 8. One flat
// loop (as llm.c): batch -> forward -> backward (x grad_accum) -> clip ->
// AdamW -> log; validation, checkpoints and the end-of-run sample around it.
// Exact resume: the model, AdamW moments and step, the dropout stream offset
// and the run's options are checkpointed; the data order is a pure function
// of the step (data/batch_loader.h), so a resumed run repeats the unbroken one.
#pragma once
#include <cstdint>
#include <set>
#include <string>

namespace ember::dist {
class Communicator;
}

namespace ember::apps {

struct TrainOptions {
  // Model source: exactly one of config / preset / init_from / resume (none: the default preset).
  std::string config, preset, init_from, resume;
  std::string data, val_data, out = "runs/ember";
  std::string tokenizer;  // tokenizer.json of --data (default: the checkpoint's, or the one beside the shards)
  int64_t batch_size = 8, seq_len = 256, grad_accum = 1, steps = 1000;
  double lr = 3e-4, min_lr = 3e-5, weight_decay = 0.1, clip = 1.0, beta1 = 0.9, beta2 = 0.95;
  int64_t warmup = 100;
  std::string schedule = "cosine";
  uint64_t seed = 1337;
  bool sequential = false;
  int64_t save_every = 0;   // 0: only at the end
  int64_t keep = 0;         // keep the newest N checkpoints (0: all)
  int64_t keep_every = 0;   // and every M-th step's forever
  int64_t log_every = 10;
  int64_t eval_every = 0;   // 0: only at the end
  int64_t eval_batches = 20;
  double val_fraction = 0.05;
  int64_t vocab_size = 0;     // > 256: train a BPE tokenizer of this size on text --data
  int64_t sample_tokens = 0;  // print a sample of this many tokens at the end
  std::string sample_prompt;
  // Data parallel (under mpirun): ZeRO-1 (0/1), gradient bucket size, and how
  // often the ranks compare parameter checksums (0: never).
  int64_t zero = 0;
  int64_t bucket_mb = 25;
  int64_t check_every = 100;
  // Print a profile (time by phase and op family, core/profiler.h) at the end and write OUT/profile.json.
  bool profile = false;
  // Matmul precision of forward and backward: "float32" or "bf16" (float32
  // weights, gradients and AdamW either way; autograd/autocast.h).
  std::string dtype = "float32";
  // Options given explicitly on the command line, by field name (batch_size); they override a resumed run's.
  std::set<std::string> given;
};

// Runs training; returns the process exit code: 0 when the run reached --steps,
// 128 + the signal when SIGINT/SIGTERM stopped it after writing a checkpoint
// (130 for Ctrl-C). Errors are thrown as ember::Error.
// With comm's world size W > 1 the run is data-parallel: rank r reads its rows
// of each batch, gradients are averaged, rank 0 prints and writes checkpoints.
int run_train(TrainOptions options, dist::Communicator& comm);
// A single process (world size 1, never MPI).
int run_train(TrainOptions options);

}  // namespace ember::apps
