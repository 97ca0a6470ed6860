// The state of one `ember train` or `ember finetune` run (apps/train/trainer.h,
// finetune.h) and the steps that build, run and end it. setup.cpp, setup_data.cpp
// (setup_chat.cpp for chat data) and setup_model.cpp fill a TrainRun in order (every
// rank runs the same collectives in the same order: agreed() blocks of
// apps/train/data_parallel.h); loop.cpp trains (chat_step.cpp: a chat step's loss);
// save.cpp writes a checkpoint; summary.cpp prints the run's first and last lines.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/checkpoint_file.h"
#include "apps/common/stopwatch.h"
#include "apps/train/data_parallel.h"
#include "apps/train/data_prep.h"
#include "apps/train/shard_loss.h"
#include "apps/common/peak_cache.h"
#include "apps/train/run_lock.h"
#include "apps/train/options.h"
#include "core/error.h"
#include "core/io/json_message.h"
#include "data/batch_loader.h"
#include "data/chat_loader.h"
#include "data/preference_loader.h"
#include "dist/communicator.h"
#include "dist/group.h"
#include "dist/pipeline_runner.h"
#include "nn/alignment/preference_loss.h"
#include "nn/sizing/model_stats.h"
#include "nn/transformer.h"
#include "optim/schedule.h"

namespace ember::apps {

struct RlState;  // apps/train/rl_run.h

struct TrainRun {
  TrainRun(TrainOptions options, dist::Communicator& communicator)
      : o(std::move(options)), comm(communicator), root(comm.is_root()), world(comm.world_size()),
        data_world(std::max<int64_t>(1, world / std::max<int64_t>(1, o.tp * o.pp))),
        data_rank(comm.rank() / std::max<int64_t>(1, o.tp) % data_world) {}

  TrainOptions o;
  dist::Communicator& comm;
  const bool root;
  const int64_t world;
  // The data-parallel ranks D = world / (--tp x --pp) and this rank's index among them: every
  // rank of one (tensor, stage) slice reads the same rows (docs/scaling.md; apps/train/
  // parallel_setup.h).
  const int64_t data_world, data_rank;
  std::unique_ptr<dist::Group> tp_group;  // --tp T > 1: this rank's tensor group
  std::unique_ptr<dist::Group> pp_group;  // --pp P > 1: this rank's pipeline (its rank: the stage)
  nn::PipelineStage stage;                // --pp P > 1: the blocks this rank's stage holds
  std::unique_ptr<dist::PipelineRunner> pipeline;  // --pp P > 1: the stage's schedule
  // --tp or --pp: the D ranks holding the same parameters (the reducer and the optimizer run over them).
  std::unique_ptr<dist::Communicator> data_comm;
  dist::Communicator& data_parallel() const { return data_comm ? *data_comm : comm; }
  // The rank of each (tensor, stage) slice that speaks for it: data index 0, tensor index 0.
  bool slice_leader() const { return data_rank == 0 && (!tp_group || tp_group->rank() == 0); }

  // Where the model comes from (resolve_model_source).
  nn::Checkpoint start;  // weights (and state) to start from, if any; its tensors freed once loaded
  std::string start_path;
  int64_t saved_world = 1, saved_batch = 0;  // the resumed run's ranks and batch (its global batch)
  nn::ModelConfig cfg;
  DType autocast = DType::Float32;  // matmul operands of forward and backward (autograd/autocast.h)
  std::vector<std::string> resume_notes;  // "--resume: --lr 0.001 overrides the run's 0.0003"
  nlohmann::json saved_data_fingerprint;  // the run's, when resuming a checkpoint that has one
  // The training data's files (size and hash): kept in the checkpoint, compared on --resume.
  nlohmann::json data_files;
  // The data paths (--data, --val-data, --tokenizer) as the command line gave them, before they
  // were made absolute: what the ranks compare, since nodes may hold one data set at other
  // absolute paths (each node's working folder with its local copy).
  std::vector<std::pair<std::string, std::string>> paths_as_given;
  std::optional<RunLock> run_lock;  // --out, held while the run lasts
  // The outermost folder of --out that this run created (rank 0; empty when --out existed):
  // removed again when the setup fails (discard_created_out).
  std::string created_out;
  std::string finetune_base;        // ember finetune: the base checkpoint's absolute path,
  std::string finetune_base_sha256;  // and its sha256 (LoRA checkpoints name both)
  int64_t added_rows = 0;            // --add-chat-tokens: new vocabulary rows of a new run

  // Tokenizer and data (setup_data.cpp).
  std::optional<data::Tokenizer> trained_tokenizer;  // --vocab-size: trained here on the text corpus
  std::optional<data::Tokenizer> tokenizer;          // the run's, if any
  TrainingTokenizer run_tokenizer;             // with where it came from (unset with --vocab-size)
  std::shared_ptr<data::TokenDataset> train_set;
  std::unique_ptr<data::BatchLoader> loader, val_loader;
  int64_t eval_batches = 0;
  // Bytes per token for bits per byte (none without a tokenizer: then it is bits per token).
  std::vector<int64_t> token_bytes;
  // ember finetune's chat data (setup_chat.cpp) instead of train_set and the loaders: the
  // training conversations' rows, their loader, and the held-out rows (none: no validation)
  // out of held_out conversations.
  std::shared_ptr<const data::ChatRows> chat_rows, chat_val_rows;
  int64_t held_out = 0;
  std::unique_ptr<data::ChatLoader> chat_loader;
  // ember align's preference pairs (setup_align.cpp) instead of the chat rows: the kept pairs
  // split into training and held-out ones (none: no validation), the loader of this rank's
  // pairs, the pairs dropped (a side without a scored token) and cut to T+1 ids; the
  // reference's per-side log-probabilities (reference_logps.cpp), chosen then rejected for
  // each pair (empty when the loss needs none); and the loss with its options.
  std::shared_ptr<const std::vector<data::PreferencePair>> pairs, val_pairs;
  std::unique_ptr<data::PairLoader> pair_loader;
  int64_t dropped_pairs = 0, cut_pairs = 0;
  std::vector<double> ref_logps, val_ref_logps;
  nn::PreferenceOptions preference;
  // ember rl's prompts, reward, reference and rollouts file (apps/train/rl_run.h); null otherwise.
  std::shared_ptr<RlState> rl;

  // Model, optimizer and where training stands (setup_model.cpp).
  std::unique_ptr<nn::Transformer> model;
  std::vector<Variable> params;  // the trained ones (a LoRA run's adapters and added rows)
  int64_t trained_params = 0;     // their elements over every stage (a tied table's once)
  Optimization optimization;  // after the model: its reducer hooks the model's parameters
  int64_t step = 0, tokens_seen = 0;
  optim::Schedule schedule;
  int64_t tokens_per_step = 0;
  nn::ModelStats stats;
};

// One optimizer step's numbers (loop.cpp, chat_step.cpp).
struct StepResult {
  double lr = 0;
  double ce = 0, z = 0, aux = 0;    // the loss terms, mean over micro-batches (and ranks)
  double norm = 0, grad_scale = 1;  // gradient norm before clipping; the clip's factor
  int64_t trained_tokens = -1;  // chat: the step's trained tokens over all micro-batches and ranks
  // align, reward: the metrics.jsonl keys of the step's pairs (loss, rewards/... or accuracy,
  // margin), over all ranks
  std::vector<std::pair<std::string, double>> metrics;
  // --pp: each stage's milliseconds of the step in its forwards, its backwards and waiting for
  // receives and sends (the bubble plus the transfers), stage by stage (pipeline_run.h).
  std::vector<double> stage_forward_ms, stage_backward_ms, stage_wait_ms;
};

// What the loop gathers for the summary.
struct RunTally {
  Stopwatch run_clock;  // from the first step
  int64_t first_step = 0;
  // One rank's matmul peak (apps/common/peak_cache.h): the cache's (peak_cached), else measured
  // before the first step; peak_cache names the cache file.
  CachedPeak rank_peak;
  bool peak_cached = false;
  std::string peak_cache;
  // What MFU divides by: rank_peak x ranks, raised to a step's rate when one ran faster
  // (the peak was measured low; peak_raised).
  double peak = 0;
  bool peak_raised = false;
  double flops = 0, step_seconds = 0;  // the model FLOPs of the steps run and their time
  double last_loss = NAN;
  ShardLoss last_eval;
  std::vector<std::pair<std::string, double>> last_align_eval;  // align, reward: held-out metrics
  bool have_eval = false;
  int64_t profile_warmup = 0;  // --profile: steps left out of the averages
  double profiled_seconds = 0;
  // --pp --profile: each stage's forward, backward and wait milliseconds summed over the steps
  // profiled (StepResult's).
  std::vector<double> stage_forward_ms, stage_backward_ms, stage_wait_ms;
};

// Runs f on the checkpoint's /train state (JSON that ember writes): a state
// that does not parse or lacks a key (another tool's file whose digest is
// fine) is one line naming the checkpoint, not the JSON library's text.
template <class F>
void with_train_state(const std::string& path, const std::string& state, F&& f) {
  try {
    f(nlohmann::json::parse(state));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": the training state (/train) is not ember's: " + json_message(e.what()));
  }
}

// setup.cpp: the model's source and the options, the data's fingerprint, the
// ranks' agreement on both, and the claim on --out.
void resolve_model_source(TrainRun& run);
void fingerprint_data(TrainRun& run);
void check_ranks_agree_on_run(TrainRun& run);
void claim_out_folder(TrainRun& run);
// After a failed setup (before the first step): removes the folder claim_out_folder created,
// lock and all, unless it holds a checkpoint. A rejected input leaves no empty run behind.
void discard_created_out(TrainRun& run) noexcept;
// setup_data.cpp: the tokenizer (trained with --vocab-size), the shards, the loaders.
void train_tokenizer_if_asked(TrainRun& run);
void choose_tokenizer(TrainRun& run);
void open_data(TrainRun& run);
void print_resume_notes(TrainRun& run);
// setup_model.cpp: model, optimizer and, on --resume, their state and the step.
void build_model_and_optimizer(TrainRun& run);
// setup_finetune.cpp: a fine-tuning run's model (the base, grown by --add-chat-tokens, with LoRA
// adapters over an NF4 base or all of it trained with --full; on --resume the checkpoint's);
// run.cfg becomes its config. Returns the trained parameters by name.
std::vector<std::pair<std::string, Variable>> build_finetune_model(TrainRun& run);
// The config and tokenizer of a fine-tuning run's base (its weights are read by
// build_finetune_model, tensor by tensor).
nn::Checkpoint read_base_without_weights(const std::string& path);
void restore_training_state(TrainRun& run);
// setup_chat.cpp (ember finetune): the base's tokenizer; the chat file read, split into
// training and held-out conversations and rendered, then the loader.
void choose_chat_tokenizer(TrainRun& run);
void open_chat_data(TrainRun& run);
// setup_align.cpp (ember align): the pairs read, rendered (dropped and cut ones counted), split
// into training and held-out pairs, and their loader; --ref's vocabulary checked against the
// policy's. After the model: the reference log-probabilities (reference_logps.cpp), computed
// once (OUT/ref_logps.json) or, on --resume, read back.
void open_preference_data(TrainRun& run);
void check_reference_vocabulary(TrainRun& run);
void prepare_reference_logps(TrainRun& run);
// align_step.cpp: forward and backward of every micro-batch of an alignment step (one forward
// over both sides, the pair loss over the step's pair count); the metrics of the held-out pairs.
void align_forward_backward(TrainRun& run, StepResult& s);
std::vector<std::pair<std::string, double>> align_validation(TrainRun& run);
// reward_step.cpp (ember reward): the same for a reward model's step (one forward over both
// sides through Transformer::scores, the reward loss over the step's pair count; no reference)
// and its held-out metrics (loss, accuracy, margin).
void reward_forward_backward(TrainRun& run, StepResult& s);
std::vector<std::pair<std::string, double>> reward_validation(TrainRun& run);
// loop.cpp: trains to --steps; returns the exit code (128 + signal when stopped).
int train_loop(TrainRun& run);
// chat_step.cpp: batch -> forward -> backward of every micro-batch of a chat step, the loss of
// docs/model.md#loss-of-a-step (divided by the trained tokens of all micro-batches and ranks).
void chat_forward_backward(TrainRun& run, StepResult& s);
// The validation loss on the held-out data (rank 0: the runs' token windows or conversations).
ShardLoss validation_loss(TrainRun& run);
// The same, its values also in record (val_loss, val_bpb; ember align and reward: val_ and each
// pair metric, kept in tally.last_align_eval, and the reward accuracy as the result's accuracy).
ShardLoss validation_loss(TrainRun& run, RunTally& tally, nlohmann::json& record);
// save.cpp: the checkpoint of at_step, OUT/latest and pruning; returns its name. Collective.
std::string save_checkpoint(TrainRun& run, int64_t at_step);
// ember align: the config's "align" object (docs/formats.md#fine-tune-checkpoints): the loss and
// its options, defaults resolved; "reference": --ref's absolute path, "" for the starting model.
nlohmann::json align_config(const TrainOptions& o);
// ember reward: the config's "reward" object (docs/formats.md#fine-tune-checkpoints):
// {"center_rewards": c}.
nlohmann::json reward_config(const TrainOptions& o);
// summary.cpp: the lines before the first step, the --profile report, the end of a run.
void print_run_start(const TrainRun& run);
void report_profile(const TrainRun& run, const RunTally& tally);
void print_summary(TrainRun& run, const RunTally& tally);

}  // namespace ember::apps
