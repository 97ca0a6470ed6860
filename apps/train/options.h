// The options of `ember train` (and of `ember finetune`, which shares most of them) as ONE table of
// fields (flag, member, help, allowed values, what --resume does with it): the command line, the
// checkpoint's saved options, the restore on --resume, the validation at start
// and the ranks' agreement under mpirun all read this table, so an option can
// no longer be missing from one of them.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ember::apps {

struct TrainOptions {
  // The command whose fields the table walks: `ember train`'s, or `ember finetune`'s
  // (docs/cli.md#fine-tuning: chat data, a base checkpoint; the train fields that apply, its own).
  bool finetune = false;
  // `ember align` (docs/cli.md#alignment): a fine-tuning run (finetune is set too) on preference
  // pairs with the pair loss `loss` and its options; ref: the reference model's checkpoint
  // (empty: the starting model). beta's default is the loss's (simpo 2, else 0.1), resolved at
  // the start of a new run.
  bool align = false;
  std::string loss = "dpo", ref;
  double beta = 0.1, label_smoothing = 0, simpo_gamma = 0.5, sft_weight = 0;
  // `ember reward` (docs/cli.md#reward-models): a fine-tuning run (finetune is set too) on
  // preference pairs training a score head (always) on the Bradley-Terry loss, with
  // center_rewards c >= 0 times (r_c + r_r)^2 added per pair.
  bool reward = false;
  double center_rewards = 0;
  // `ember rl` (docs/cli.md#rl-from-a-reward): a fine-tuning run (finetune is set too) on prompts
  // (`data`, given as --prompts): each step samples group_size completions of each of its
  // prompts, scores them (reward_rule "match", or the reward model reward_model) and takes
  // `iterations` updates of the algo's loss on them (docs/model.md#rl-from-a-reward).
  bool rl = false;
  std::string algo = "grpo", reward_rule, reward_model, rollouts_out;
  int64_t group_size = 8, max_tokens = 64, iterations = 1;
  double temperature = 1.0, clip_ratio = 0.2, kl = 0.04, vf_coef = 0.1;
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
  // The parallel layout (train only; docs/scaling.md): tensor-parallel ranks T, pipeline stages P,
  // micro-batches M of a rank's batch (0: P), the blocks of each stage ("3,3,2"; "": even) and
  // the pipeline schedule. The resuming command line's, never the checkpoint's.
  int64_t tp = 1, pp = 1, micro_batches = 0;
  std::string pp_layers, pp_schedule = "1f1b";
  int64_t bucket_mb = 25;
  int64_t check_every = 100;
  // Print a profile (time by phase and op family, core/profiler.h) at the end and write OUT/profile.json.
  bool profile = false;
  // Activation checkpointing (nn::Transformer::set_activation_checkpointing): every block, or every
  // K-th (blocks 0, K, 2K, ...; 0: per checkpoint_activations); bit-identical results either way.
  bool checkpoint_activations = false;
  int64_t checkpoint_every = 0;
  // Matmul precision of forward and backward: "float32" or "bf16" (float32
  // weights, gradients and AdamW either way; autograd/autocast.h).
  std::string dtype = "float32";
  // --resume: accept training data that differ from the run's (another --data, or changed files).
  bool allow_data_change = false;
  // ember finetune: the checkpoint fine-tuned and how (--full: every parameter, else LoRA adapters
  // on lora_targets over a base stored as quantize says); add_chat_tokens appends the ChatML
  // tokens.
  std::string base;
  bool full = false, add_chat_tokens = false;
  int64_t lora_r = 8;
  double lora_alpha = 16, lora_dropout = 0;
  std::string lora_targets = "q,v", quantize = "none";
  // Options given explicitly on the command line, by field name (batch_size); they override a resumed run's.
  std::set<std::string> given;
};

// One field of the table as the command line sees it (apps/cli/train_options.h
// registers these): the flag, its help, the member of `o` it sets, and its key
// in TrainOptions::given ("--batch-size" -> "batch_size").
struct OptionFlag {
  const char* flag;
  const char* help;
  std::variant<int64_t*, uint64_t*, double*, std::string*, bool*> target;
  bool existing_file;  // the value names a file that must exist
  std::string key;
};
// Every field of o's command (o.reward, o.align, o.finetune), in the table's order, bound to o's members.
std::vector<OptionFlag> option_flags(TrainOptions& o);

// One line naming the first option outside its allowed range or names
// (as an ember::Error); cross-field rules too (--min-lr <= --lr).
void validate_options(const TrainOptions& o);

// The run's options as saved in the checkpoint (every resumable field).
nlohmann::json options_to_json(const TrainOptions& o);
// --resume: takes the saved options except those given on the command line.
// A given option that differs from the run's is an override: returns one note
// per override ("--resume: --lr 0.001 overrides the run's 0.0003"), or throws
// when the table refuses that change (the data order; --data without
// o.allow_data_change).
std::vector<std::string> restore_options(const nlohmann::json& saved, TrainOptions& o);

// --data, --val-data and --tokenizer made absolute (run_paths.h): the run stores them so, and
// --resume finds them from any working directory (a run that stored them relative resumes from
// the folder it started in).
void absolutize_paths(TrainOptions& o);

// Every field of the table as (flag, value as text), in the table's order:
// what the ranks of a data-parallel run must agree on.
std::vector<std::pair<std::string, std::string>> option_values(const TrainOptions& o);
// The same pairs for the data paths only (--data, --val-data, --tokenizer).
std::vector<std::pair<std::string, std::string>> path_option_values(const TrainOptions& o);

// The command o's fields belong to: "train", "finetune", "align", "reward" or "rl".
const char* command_name(const TrainOptions& o);

// The blocks' activation-checkpointing interval the options ask for: --checkpoint-every K, else 1
// with --checkpoint-activations, else 0 (none).
int64_t checkpoint_interval(const TrainOptions& o);

// The folder a run writes: --out, else (with --resume and no --out) the
// resumed run's own folder.
std::string run_folder(const TrainOptions& o);

}  // namespace ember::apps
