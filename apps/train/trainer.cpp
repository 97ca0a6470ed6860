// The training loop (see trainer.h).
#include "apps/train/trainer.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "nn/checkpoint.h"
#include "apps/train/closed_stdout.h"
#include "apps/train/data_fingerprint.h"
#include "apps/train/data_parallel.h"
#include "apps/train/data_prep.h"
#include "apps/train/finite_parameters.h"
#include "apps/train/evaluation.h"
#include "apps/bench/matmul_peak.h"
#include "apps/train/metrics_log.h"
#include "apps/train/model_io.h"
#include "nn/presets.h"
#include "apps/bench/profile_report.h"
#include "apps/train/run_files.h"
#include "apps/train/run_lock.h"
#include "apps/train/progress.h"
#include "apps/plot/training_plot.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/io/json_message.h"
#include "core/kernels/matmul.h"
#include "core/profiler.h"
#include "core/threads.h"
#include "core/io/atomic_file.h"
#include "data/batch_loader.h"
#include "data/tokenizer/bpe_trainer.h"
#include "dist/communicator.h"
#include "dist/consistency.h"
#include "nn/model_stats.h"
#include "nn/transformer.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"

namespace ember::apps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// Runs f on the checkpoint's /train state (JSON that ember writes): a state
// that does not parse or lacks a key (another tool's file whose digest is
// fine) is one line naming the checkpoint, not the JSON library's text.
template <class F>
void with_train_state(const std::string& path, const std::string& state, F&& f) {
  try {
    f(json::parse(state));
  } catch (const json::exception& e) {
    throw Error(path + ": the training state (/train) is not ember's: " + json_message(e.what()));
  }
}

}  // namespace

int run_train(TrainOptions o) {
  dist::Communicator single(dist::Launch::Single);
  return run_train(std::move(o), single);
}

int run_train(TrainOptions o, dist::Communicator& comm) {
  const bool root = comm.is_root();
  const int64_t world = comm.world_size();
  // --- where the model comes from -------------------------------------------------
  const int sources = !o.config.empty() + !o.preset.empty() + !o.init_from.empty() + !o.resume.empty();
  EMBER_CHECK(sources <= 1 || (sources == 2 && !o.resume.empty() && (!o.config.empty() || !o.preset.empty())),
              "give one of --config, --preset, --init-from, --resume");
  nn::Checkpoint start;  // weights (and state) to start from, if any
  std::string start_path;
  int64_t saved_world = 1, saved_batch = 0;
  nn::ModelConfig cfg;
  DType autocast = DType::Float32;  // matmul operands of forward and backward (autograd/autocast.h)
  ignore_sigpipe();  // `ember train | head`: training goes on without stdout (closed_stdout.h)
  std::vector<std::string> resume_notes;  // "--resume: --lr 0.001 overrides the run's 0.0003"
  json saved_data_fingerprint;            // the run's, when resuming a checkpoint that has one
  agreed(comm, [&] {
    if (!o.resume.empty()) {
      start_path = find_resume_checkpoint(o.resume);
      start = nn::read_checkpoint(start_path, /*with_optim=*/true);
      EMBER_CHECK(start.train_state, start_path, ": has no training state (/train); use --init-from");
      with_train_state(start_path, *start.train_state, [&](const json& st) {
        resume_notes = restore_options(st.at("options"), o);
        saved_data_fingerprint = st.value("data_fingerprint", json());
        saved_batch = st.at("options").value("batch_size", int64_t{0});
        saved_world = st.value("world_size", int64_t{1});
      });
      if (!o.given.count("out")) o.out = o.resume;
    } else if (!o.init_from.empty()) {
      start_path = o.init_from;
      start = nn::read_checkpoint(start_path, /*with_optim=*/false);
    }
    validate_options(o);  // before any work: one line naming the option and what it allows
    if (!o.config.empty()) {
      cfg = nn::ModelConfig::from_file(o.config);
    } else if (!o.preset.empty()) {
      cfg = nn::preset_config(o.preset);
    } else if (!start_path.empty()) {
      cfg = start.config;
    } else {
      cfg = nn::preset_config("dense-small");
    }
    EMBER_CHECK(o.seq_len <= cfg.max_seq_len, "--seq-len ", o.seq_len,
                " must be between 1 and the model's max_seq_len (", cfg.max_seq_len, ")");
    if (o.data.empty()) o.data = default_corpus();
  });
  // The training data's files (size and hash): kept in the checkpoint, compared on --resume.
  json data_fingerprint_now;
  agreed(comm, [&] {
    EMBER_CHECK(fs::exists(o.data) || o.data.find_first_of("*?[") != std::string::npos, "--data: ",
                o.data, ": no such file or directory");
    data_fingerprint_now = data_fingerprint(o.data, o.val_data);
    if (!saved_data_fingerprint.is_null()) {
      const std::string change = describe_data_change(saved_data_fingerprint, data_fingerprint_now);
      EMBER_CHECK(change.empty() || o.allow_data_change, "--resume: the training data changed since the run started (",
                  change, "); give --allow-data-change to train on it anyway");
      if (!change.empty()) resume_notes.push_back("--resume: training on changed data (" + change + ")");
    }
  });
  // Under mpirun every rank must run the same: options, model config, data (dist/consistency.h).
  if (world > 1) {
    std::vector<std::pair<std::string, std::string>> fields = option_values(o);
    fields.emplace_back("the checkpoint started from", start_path);
    const json config = json::parse(cfg.to_json());
    for (auto it = config.begin(); it != config.end(); ++it) {
      fields.emplace_back("the model config's " + it.key(), it.value().dump());
    }
    std::string files;  // one field, so that every rank has the same fields
    for (const json& f : data_fingerprint_now) {
      files += (files.empty() ? "" : "; ") + f.value("file", std::string()) + " " +
               std::to_string(f.value("bytes", uint64_t{0})) + " bytes hash " + f.value("hash", std::string());
    }
    fields.emplace_back("the data files (size and content)", files);
    dist::check_ranks_agree(comm, fields);
  }
  // Claim --out before any long work or any write (tokenizer training, data preparation):
  // the model fits the machine, the folder's lock (one run per folder), no other run's
  // checkpoints in it, then its temporaries are stale (rank 0 writes the folder).
  std::optional<RunLock> run_lock;
  agreed(comm, [&] {
    nn::ModelConfig planned = cfg;  // --vocab-size sets the vocabulary below
    if (o.vocab_size > 0 && start_path.empty()) planned.vocab_size = o.vocab_size;
    nn::require_fits_in_memory(nn::training_memory(planned, o.batch_size, o.seq_len));
    if (root) {
      ensure_writable_dir(o.out, "--out");
      run_lock.emplace(o.out);
      check_no_other_run(o.out, o.resume);
      remove_stale_temporaries(o.out);
    }
  });
  // --vocab-size: a BPE tokenizer trained here on the text corpus (rank 0; the
  // others receive it); the model's vocabulary follows it.
  std::optional<data::Tokenizer> trained_tokenizer;
  if (o.vocab_size > 0 && start_path.empty()) {
    std::string tokenizer_json;
    agreed(comm, [&] {
      EMBER_CHECK(!is_shard_spec(o.data), "--vocab-size trains a tokenizer on text; --data ", o.data, " is token shards");
      data::BpeTrainOptions t;
      t.vocab_size = static_cast<size_t>(o.vocab_size);
      data::CorpusOptions corpus;
      corpus.separator_line = "%";
      if (root) tokenizer_json = data::train_bpe_on_corpus({o.data}, t, corpus).to_json();
    });
    comm.broadcast(tokenizer_json);
    trained_tokenizer = data::Tokenizer::from_json(tokenizer_json);
    nn::ModelConfig c = cfg;
    c.vocab_size = static_cast<int64_t>(trained_tokenizer->vocab_size());
    cfg = nn::ModelConfig::from_json(c.to_json(), "config with --vocab-size");
  }
  std::optional<data::Tokenizer> tokenizer;
  TrainingTokenizer run_tokenizer;  // with where it came from (unset with --vocab-size)
  std::unique_ptr<data::BatchLoader> loader_ptr, val_loader;
  std::shared_ptr<data::TokenDataset> train_set;
  int64_t eval_batches = 0;
  agreed(comm, [&] {
    if (!start_path.empty()) {
      EMBER_CHECK(cfg.to_json() == start.config.to_json(), start_path,
                  ": the checkpoint's model config does not match the one given by --config/--preset");
    }
    autocast = parse_autocast_dtype(o.dtype);

    // --- tokenizer and data -------------------------------------------------------------
    // --tokenizer, the checkpoint's, the one beside the shards, else the byte tokenizer when
    // the vocabulary holds the bytes (data_prep.h); a model over token shards of its own
    // vocabulary may have none.
    if (trained_tokenizer) {
      tokenizer = trained_tokenizer;
    } else {
      run_tokenizer = training_tokenizer(o.tokenizer, start.tokenizer_json, cfg, o.data);
      tokenizer = run_tokenizer.tokenizer;
    }
    if (!is_shard_spec(o.data)) {
      EMBER_CHECK(tokenizer && static_cast<int64_t>(tokenizer->vocab_size()) <= cfg.vocab_size,
                  "--data: tokenising text needs a tokenizer that fits the model's vocab_size (",
                  cfg.vocab_size, "); the byte tokenizer needs at least 256");
    }
  });
  // Text is tokenised into OUT/data by rank 0 alone; the others wait, then open the shards.
  PreparedData data;
  agreed(comm, [&] {
    if (root) data = prepare_data(o.data, o.val_data, tokenizer ? *tokenizer : data::Tokenizer(), o.out, o.val_fraction);
  });
  comm.broadcast(data.train);
  comm.broadcast(data.val);
  agreed(comm, [&] {
    train_set = std::make_shared<data::TokenDataset>(data.train);
    const uint32_t max_id = data::max_token_id(*train_set);
    EMBER_CHECK(static_cast<int64_t>(max_id) < cfg.vocab_size, "--data: token id ", max_id,
                " is outside the model's vocabulary (vocab_size ", cfg.vocab_size, ")");
    check_tokenizer_covers(run_tokenizer, max_id, o.data);
    loader_ptr = std::make_unique<data::BatchLoader>(
        train_set, data::BatchLoaderOptions{o.batch_size, o.seq_len, o.grad_accum, world, comm.rank(), o.sequential, o.seed});
    if (!data.val.empty()) {
      auto val_set = std::make_shared<data::TokenDataset>(data.val);
      EMBER_CHECK(static_cast<int64_t>(data::max_token_id(*val_set)) < cfg.vocab_size,
                  "--val-data: a token id is outside the model's vocabulary");
      if (static_cast<int64_t>(val_set->size()) > o.seq_len) {
        // Rank 0 evaluates alone, in batches of the global batch's rows (as one process would).
        const int64_t rows = world * o.batch_size;
        val_loader = std::make_unique<data::BatchLoader>(val_set, data::BatchLoaderOptions{rows, o.seq_len, 1, 1, 0, true, 0});
        eval_batches = std::min(o.eval_batches, std::max<int64_t>(1, val_loader->num_windows() / rows));
      }
    }
  });
  // What --resume changes, once the run has its folder and data (a refused run prints only its error).
  if (root) {
    for (const std::string& note : resume_notes) std::printf("%s\n", note.c_str());
    std::fflush(stdout);
  }
  note_global_batch_change(comm, saved_world, saved_batch, o.batch_size);
  const data::BatchLoader& loader = *loader_ptr;
  // Bytes per token for bits per byte (none without a tokenizer: then it is bits per token).
  const std::vector<int64_t> token_bytes = tokenizer ? token_byte_lengths(*tokenizer, cfg.vocab_size) : std::vector<int64_t>();

  // --- model and optimizer ---------------------------------------------------------------
  nn::Transformer model(cfg, o.seed);
  if (!start_path.empty()) model.load_state_dict(start.model);
  const auto params = model.parameters();
  // Every rank starts from rank 0's weights (also after --init-from / --resume).
  dist::broadcast_parameters(comm, params);
  // Gradients are averaged across ranks by the reducer (none in a plain single-process run).
  Optimization optimization = make_optimization(comm, model, o);
  dist::Reducer* reducer = optimization.reducer.get();
  optim::Optimizer& opt = *optimization.optimizer;
  int64_t step = 0;
  int64_t tokens_seen = 0;
  agreed(comm, [&] {
    if (!o.resume.empty()) {
      EMBER_CHECK(start.optim_step, start_path, ": has no optimizer state");
      opt.load_state_dict(start.optim, *start.optim_step, start.optim_param_steps);
      with_train_state(start_path, *start.train_state, [&](const json& st) {
        step = st.at("step").get<int64_t>();
        tokens_seen = st.at("tokens_seen").get<int64_t>();
        model.dropout_generator().offset = st.at("dropout_offset").get<uint64_t>();
      });
      EMBER_CHECK(step <= o.steps, "--resume: the checkpoint is at step ", step, ", beyond --steps ", o.steps);
    }
  });
  const optim::Schedule schedule{o.schedule, o.lr, o.min_lr, o.warmup, o.steps, o.steps / 5};
  const int64_t tokens_per_step = world * o.batch_size * o.seq_len * o.grad_accum;
  const nn::ModelStats stats = nn::model_stats(cfg, o.batch_size, o.seq_len);

  // Collective: ZeroAdamW gathers the moments on every rank; rank 0 writes
  // while the others wait, so no rank runs ahead of the file.
  auto save = [&](int64_t at_step) {
    EMBER_PROFILE_PHASE(kCheckpointPhase);
    const std::string name = checkpoint_name(at_step);
    agreed(comm, [&] {  // `latest` never moves to diverged weights
      const std::string bad = first_non_finite_parameter(model.named_parameters());
      EMBER_CHECK(bad.empty(), "step ", at_step, ": parameter ", bad,
                  " is not finite (the run diverged); no checkpoint written");
    });
    nn::Checkpoint c;
    if (o.zero) c.optim = opt.state_dict();
    if (!root) {
      comm.barrier();
      return name;
    }
    c.config = cfg;
    c.model = model.state_dict();
    if (!o.zero) c.optim = opt.state_dict();
    c.optim_step = opt.steps();
    c.optim_param_steps = opt.param_steps();
    c.train_step = at_step;
    c.train_state = json{{"step", at_step},
                         {"tokens_seen", tokens_seen},
                         {"dropout_offset", model.dropout_generator().offset},
                         {"world_size", world},
                         {"options", options_to_json(o)},
                         {"data_fingerprint", data_fingerprint_now}}
                        .dump();
    if (tokenizer) c.tokenizer_json = tokenizer->to_json();
    nn::write_checkpoint((fs::path(o.out) / name).string(), c);
    write_latest(o.out, name);
    prune_checkpoints(o.out, o.keep, o.keep_every);
    comm.barrier();
    return name;
  };

  pin_threads();  // once, before the first step, with EMBER_PIN_THREADS=1 (core/threads.h)
  if (root && world > 1) {
    std::printf("ember train: %lld ranks x %d threads, %s\n", static_cast<long long>(world), omp_get_max_threads(),
                o.zero ? "ZeRO-1" : "all-reduce");
  }
  if (root) {
    std::printf("ember train: %s parameters, %lld tokens/step (%sB %lld x T %lld x accum %lld), %lld steps, out %s\n",
                std::to_string(stats.total_params).c_str(), static_cast<long long>(tokens_per_step),
                world > 1 ? ("W " + std::to_string(world) + " x ").c_str() : "",
                static_cast<long long>(o.batch_size), static_cast<long long>(o.seq_len),
                static_cast<long long>(o.grad_accum), static_cast<long long>(o.steps), o.out.c_str());
    if (autocast == DType::BFloat16) {
      std::printf("mixed precision: bf16 matmuls, float32 weights, gradients and AdamW%s\n",
                  kernels::bf16_matmul_native() ? "" : " (warning: this CPU has no bf16 instructions; slower than float32)");
    }
    std::printf("data: %llu train tokens%s\n", static_cast<unsigned long long>(train_set->size()),
                val_loader ? (", validation " + std::to_string(val_loader->num_windows()) + " windows").c_str() : ", no validation");
    continue_if_stdout_closed();
  }

  g_stop_signal = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // MFU divides by the best of 6 products (3 rounds) at the start; on a busy machine that
  // can be low, so the summary of a longer run re-measures and takes the better.
  const MatmulPeak start_peak = measure_peak(3, 2, autocast);
  const double peak = start_peak.flops * static_cast<double>(world);
  MetricsLog metrics(root ? (fs::path(o.out) / "metrics.jsonl").string() : "");
  // Plain lines, plus a bar redrawn in place when stdout is a terminal.
  TrainProgress progress(stdout, root && TrainProgress::stdout_is_terminal());
  const auto run_start = Clock::now();
  const int64_t first_step = step;
  // --profile: the first step (two of a longer run) is warm-up, left out of the averages.
  const int64_t profile_warmup =
      std::max<int64_t>(0, std::min<int64_t>(o.steps - first_step > 10 ? 2 : 1, o.steps - first_step - 1));
  double profiled_seconds = 0;
  struct ProfilerSwitch {  // off again however the run ends
    bool on;
    explicit ProfilerSwitch(bool profile) : on(profile) {
      if (on) prof::enable();
    }
    ~ProfilerSwitch() {
      if (on) prof::enable(false);
    }
  } profiler_switch(o.profile);
  auto report_profile = [&] {
    if (!o.profile || !root) return;
    const prof::Snapshot snap = prof::snapshot();
    const double wall_ms = snap.steps > 0 ? profiled_seconds * 1e3 / static_cast<double>(snap.steps) : 0;
    std::printf("%s", profile_table(snap, profile_warmup, wall_ms).c_str());
    write_file_atomically((fs::path(o.out) / "profile.json").string(),
                          profile_json(snap, profile_warmup, wall_ms).dump(2) + "\n");
    std::printf("profile written to %s\n", (fs::path(o.out) / "profile.json").string().c_str());
    std::fflush(stdout);
  };
  double mfu_sum = 0;
  double last_loss = NAN;
  EvalResult last_eval;
  bool have_eval = false;
  while (step < o.steps) {
    const auto t0 = Clock::now();
    const double lr = optim::lr_at(schedule, step);
    opt.zero_grad();
    double ce = 0, z = 0, aux = 0;
    std::optional<AutocastGuard> mixed(std::in_place, autocast);  // forward and backward only
    for (int64_t u = 0; u < o.grad_accum; ++u) {
      if (reducer) reducer->set_sync(u == o.grad_accum - 1);
      Tensor x, y;
      {
        EMBER_PROFILE_PHASE(kDataPhase);
        EMBER_PROFILE_SCOPE(kDataFamily);
        const Tensor b = loader.batch(step, u);
        x = b.narrow(1, 0, o.seq_len).contiguous();
        y = b.narrow(1, 1, o.seq_len).contiguous();
      }
      nn::LossTerms l;
      {
        EMBER_PROFILE_PHASE(kForwardPhase);
        l = model.loss(model.forward(x), y);
      }
      {
        EMBER_PROFILE_PHASE(kBackwardPhase);
        (o.grad_accum > 1 ? l.total / static_cast<double>(o.grad_accum) : l.total).backward();
      }
      ce += l.ce / static_cast<double>(o.grad_accum);
      z += l.z / static_cast<double>(o.grad_accum);
      aux += l.aux / static_cast<double>(o.grad_accum);
    }
    if (reducer) {
      EMBER_PROFILE_PHASE(kCommWaitPhase);
      reducer->finish();
    }
    mixed.reset();
    // Clipping: the norm here, the scaling fused into the optimizer's pass
    // (grad_scale) instead of a pass of its own over every gradient; ZeRO-1
    // clips its shard of the gradient in place.
    double norm = 0, grad_scale = 1;
    {
      EMBER_PROFILE_PHASE(kClipPhase);
      if (o.zero) {
        norm = reducer->clip_grad_norm(o.clip);
      } else {
        norm = optim::grad_norm(params);
        grad_scale = optim::clip_coefficient(norm, o.clip);
      }
    }
    if (world > 1) {  // the mean over ranks: every rank logs and checks the same loss
      EMBER_PROFILE_PHASE(kCommWaitPhase);
      const std::vector<double> mean = comm.all_reduce(std::vector<double>{ce, z, aux}, dist::ReduceOp::Average);
      ce = mean[0], z = mean[1], aux = mean[2];
    }
    agreed(comm, [&] {  // the same on every rank: rank 0 reports it once
      EMBER_CHECK(std::isfinite(ce) && std::isfinite(norm), "step ", step, ": non-finite ",
                  std::isfinite(ce) ? "gradient norm" : "loss", " (loss ", ce, ", grad norm ", norm,
                  "); stopped before the update, no checkpoint written");
    });
    {
      EMBER_PROFILE_PHASE(kOptimizerPhase);
      opt.step(lr, grad_scale);
    }
    ++step;
    tokens_seen += tokens_per_step;
    last_loss = ce;
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
    const double tok_s = static_cast<double>(tokens_per_step) / dt;
    const double mfu = stats.flops_per_token * tok_s / peak;
    mfu_sum += mfu;
    const double eta = elapsed / static_cast<double>(step - first_step) * static_cast<double>(o.steps - step);
    json m = {{"step", step}, {"loss", ce}, {"z", z}, {"aux", aux}, {"lr", lr}, {"grad_norm", norm},
              {"tokens", tokens_seen}, {"tokens_per_s", tok_s}, {"ms_per_step", dt * 1e3}, {"mfu", mfu},
              {"eta_s", eta}};
    const bool eval_now = val_loader && eval_batches > 0 && ((o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps);
    if (eval_now) {
      agreed(comm, [&] {  // rank 0 evaluates; a non-finite loss stops every rank
        if (!root) return;
        AutocastGuard eval_mixed(autocast);  // validated as trained
        last_eval = evaluate(model, *val_loader, eval_batches, token_bytes);
        have_eval = true;
        m["val_loss"] = last_eval.loss;
        m["val_bpb"] = last_eval.bits_per_byte;
        EMBER_CHECK(std::isfinite(last_eval.loss), "step ", step, ": non-finite validation loss (", last_eval.loss,
                    "); the run diverged, no checkpoint written");
      });
    }
    if (world > 1 && o.check_every > 0 && (step % o.check_every == 0 || step == o.steps)) {
      dist::check_parameters_consistent(comm, params, step);
    }
    metrics.append(m.dump());
    if (root) {
      const StepReport r{step, o.steps, ce, lr, norm, tok_s, dt * 1e3, mfu, eta,
                         eval_now, last_eval.loss, last_eval.bits_per_byte, tokenizer.has_value()};
      progress.step(r, (o.log_every > 0 && step % o.log_every == 0) || step == o.steps || step == first_step + 1 || eval_now);
      continue_if_stdout_closed();
    }
    if ((o.save_every > 0 && step % o.save_every == 0) || step == o.steps) save(step);
    if (o.profile) {
      prof::end_step();
      profiled_seconds += dt;
      if (step - first_step == profile_warmup) {  // the averages start after the warm-up
        prof::reset();
        profiled_seconds = 0;
      }
    }
    // Every rank stops at the same step when any rank got the signal.
    if (comm.any(g_stop_signal != 0)) {
      const bool saved = (o.save_every > 0 && step % o.save_every == 0) || step == o.steps;
      const std::string name = saved ? checkpoint_name(step) : save(step);
      progress.clear();
      // The signal some rank got (the highest), so that every rank exits alike.
      int sig = g_stop_signal.load();
      if (world > 1) sig = static_cast<int>(comm.all_reduce(static_cast<double>(sig), dist::ReduceOp::Max));
      if (sig == 0) sig = SIGTERM;
      if (root) {
        std::printf("stopped by signal %d at step %lld; checkpoint %s\n", sig, static_cast<long long>(step), name.c_str());
        std::fflush(stdout);
        write_run_plot_or_warn(o.out);
      }
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      report_profile();
      return 128 + sig;  // the shell's code for "ended by this signal": 130 for Ctrl-C
    }
  }
  // A --resume already at --steps trains nothing; its checkpoint is written
  // again into --out, so that the run ends with one and `latest` names it
  // (a run killed between a checkpoint and `latest` left it pointing earlier).
  if (step == first_step) save(step);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  progress.clear();
  if (!root) return 0;
  const double total = std::chrono::duration<double>(Clock::now() - run_start).count();
  std::printf("done: %lld steps, %lld tokens in %.1f s", static_cast<long long>(step),
              static_cast<long long>(tokens_seen), total);
  if (step > first_step) std::printf("; final loss %.4f", last_loss);
  if (have_eval) {
    std::printf(", val loss %.4f (%.3f bits/%s)", last_eval.loss, last_eval.bits_per_byte, tokenizer ? "byte" : "token");
  }
  std::printf("; checkpoint %s\n", (fs::path(o.out) / checkpoint_name(step)).string().c_str());
  write_run_plot_or_warn(o.out);  // OUT/loss.svg; a warning, never a failed run
  if (step > first_step) {
    // A busy start lowers the peak: after a run of 20 s or more, the better of start and end.
    const MatmulPeak end_peak = total >= 20 ? measure_peak(3, 2, autocast) : MatmulPeak{};
    const double best = std::max(start_peak.flops, end_peak.flops) * static_cast<double>(world);
    std::printf("mean MFU %.1f%% of the %s matmul peak %.1f GFLOP/s%s (best of %d 1024^3 products at start",
                100 * mfu_sum / static_cast<double>(step - first_step) * peak / best,
                autocast == DType::BFloat16 ? "bf16" : "float32", best / 1e9,
                world > 1 ? " x ranks" : "", start_peak.products);
    if (end_peak.products > 0) {
      std::printf(" and %d at the end: %.1f and %.1f GFLOP/s; progress lines used the start's", end_peak.products,
                  start_peak.flops / 1e9, end_peak.flops / 1e9);
    }
    std::printf(")\n");
  }
  report_profile();
  if (o.sample_tokens > 0 && tokenizer) print_sample(model, *tokenizer, o.sample_prompt, o.sample_tokens, o.seed);
  return 0;
}

}  // namespace ember::apps
