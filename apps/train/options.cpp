// The field tables of `ember train`'s and `ember finetune`'s options (see options.h;
// finetune's holds its own fields and train's that apply) and the functions that walk them: the
// flags the CLI registers (apps/cli/train_options.cpp), validation, checkpoint JSON, restore on
// --resume with its notes and refusals, and the values the ranks compare.
#include "apps/train/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>
#include <variant>

#include "apps/train/run_paths.h"
#include "core/error.h"
#include "nn/adapters/adapters.h"

namespace ember::apps {
namespace {

using nlohmann::json;

// What --resume does with a field the command line gives again with another value.
enum class OnResume {
  NotSaved,    // this invocation's own (--config, --resume, --out, --profile): not in the checkpoint
  Free,        // restored; a given flag overrides it, with a note on stdout
  Refused,     // restored; another value changes which windows the rest of the epoch reads
               // (it would repeat or skip data), so it is refused
  DataChange,  // restored; another value needs --allow-data-change
  Fixed,       // restored; it defines the model being trained (the fine-tune's mode), so another
               // value is refused
};

using Member = std::variant<int64_t TrainOptions::*, uint64_t TrainOptions::*, double TrainOptions::*,
                            std::string TrainOptions::*, bool TrainOptions::*>;

// Numbers in [lo, hi] (an end excluded when open), or strings among names; doubles must be finite.
struct Allowed {
  double lo = -HUGE_VAL, hi = HUGE_VAL;
  bool lo_open = false, hi_open = false;
  std::vector<std::string> names;
};
const Allowed kAny{};
const Allowed kPositive{0, HUGE_VAL, true, false, {}};
const Allowed kNonNegative{0, HUGE_VAL, false, false, {}};
const Allowed kUnitOpen{0, 1, false, true, {}};  // [0, 1)
const Allowed kHalfOpen{0, 0.5, false, true, {}};  // [0, 0.5)
Allowed one_of(std::vector<std::string> names) { return {-HUGE_VAL, HUGE_VAL, false, false, std::move(names)}; }
Allowed between(double lo, double hi) { return {lo, hi, false, false, {}}; }

struct Field {
  const char* flag;
  Member member;
  const char* help;
  OnResume resume;
  Allowed allowed;
  bool existing_file = false;  // the CLI checks that the file exists
  const char* key = nullptr;   // its key (default: the flag's name, "--batch-size" -> batch_size)
};

using O = TrainOptions;

// The fields naming data files: stored absolute (absolutize_paths), compared as files on --resume.
constexpr const char* kPathKeys[] = {"data", "val_data", "tokenizer"};
bool is_path_key(const std::string& key) {
  return std::any_of(std::begin(kPathKeys), std::end(kPathKeys),
                     [&](const char* k) { return key == k; });
}

// Under mpirun: ZeRO, the tensor and pipeline layout, the reducer's buckets and checks.
std::vector<Field> distributed_fields() {
  return {
      {"--zero", &O::zero,
       "under mpirun: 1 shards the AdamW moments across ranks (ZeRO-1), 2 the gradients too (ZeRO-2), "
       "3 the parameters too (ZeRO-3)",
       OnResume::Free, between(0, 3)},
      {"--tp", &O::tp,
       "under mpirun: Megatron-style tensor parallelism over T ranks (each block's projections, "
       "the embedding and the head split; mpirun -np T)",
       OnResume::NotSaved, kPositive},
      {"--pp", &O::pp,
       "under mpirun: pipeline parallelism over P stages of contiguous blocks (mpirun -np T x P x D)",
       OnResume::NotSaved, kPositive},
      {"--micro-batches", &O::micro_batches,
       "--pp: micro-batches M each rank's batch is cut into (0: P; --batch-size divisible by M)",
       OnResume::NotSaved, kNonNegative},
      {"--pp-layers", &O::pp_layers, "--pp: blocks of each stage, like 3,3,2 (default: even, the first "
                                     "stages one more)",
       OnResume::NotSaved, kAny},
      {"--pp-schedule", &O::pp_schedule, "--pp: 1f1b (at most P - s micro-batches held on stage s) or gpipe",
       OnResume::NotSaved, one_of({"1f1b", "gpipe"})},
      {"--bucket-mb", &O::bucket_mb, "under mpirun: gradient all-reduce bucket size in MiB (the first is 1 MiB)",
       OnResume::Free, kPositive},
      {"--check-every", &O::check_every,
       "under mpirun: compare parameter checksums across ranks every N steps (0: never)", OnResume::Free,
       kNonNegative},
  };
}

std::vector<Field> all_fields() {
  std::vector<Field> table = {
      {"--config", &O::config, "model config JSON (docs/model.md)", OnResume::NotSaved, kAny, true},
      {"--preset", &O::preset, "shipped model: dense-small, moe-small, gpt2-small, llama-1b", OnResume::NotSaved, kAny},
      {"--init-from", &O::init_from, "start from this checkpoint's weights (fine-tuning)", OnResume::NotSaved, kAny,
       true},
      {"--resume", &O::resume, "continue the run in this folder from its newest complete checkpoint "
                               "(with its options; a given option overrides one, with a note)",
       OnResume::NotSaved, kAny},
      {"--data", &O::data, "text file/folder, or llm.c token shards (file, folder, glob); default: fortunes",
       OnResume::DataChange, kAny},
      {"--tokenizer", &O::tokenizer,
       "tokenizer.json the --data shards were encoded with (default: the checkpoint's, else tokenizer.json beside "
       "the shards, else bytes); stored in the checkpoints",
       OnResume::DataChange, kAny, true},
      {"--val-data", &O::val_data, "validation token shards (default: a held-out tail of --data text)",
       OnResume::DataChange, kAny},
      {"--allow-data-change", &O::allow_data_change,
       "--resume: accept another --data / --val-data / --val-fraction, or data files changed since the run started",
       OnResume::NotSaved, kAny},
      {"--batch-size", &O::batch_size, "rows per micro-batch (per rank)", OnResume::Free, kPositive},
      {"--seq-len", &O::seq_len, "tokens per row", OnResume::Refused, kPositive},
      {"--grad-accum", &O::grad_accum, "micro-batches per step", OnResume::Free, kPositive},
      {"--steps", &O::steps, "total steps of the run (the schedule's length)", OnResume::Free, kPositive},
      {"--lr", &O::lr, "peak learning rate", OnResume::Free, kPositive},
      {"--min-lr", &O::min_lr, "final learning rate (at most --lr)", OnResume::Free, kNonNegative},
      {"--warmup", &O::warmup, "linear warmup steps", OnResume::Free, kNonNegative},
      {"--schedule", &O::schedule, "cosine, constant, linear or wsd", OnResume::Free,
       one_of({"cosine", "constant", "linear", "wsd"})},
      {"--weight-decay", &O::weight_decay, "AdamW decoupled weight decay (tensors of 2+ dims)", OnResume::Free,
       kNonNegative},
      {"--beta1", &O::beta1, "AdamW beta1", OnResume::Free, kUnitOpen},
      {"--beta2", &O::beta2, "AdamW beta2", OnResume::Free, kUnitOpen},
      {"--clip", &O::clip, "clip gradients to this global L2 norm (0: off)", OnResume::Free, kNonNegative},
      {"--seed", &O::seed, "seed of the initial weights, data order and dropout", OnResume::Refused, kAny},
      {"--sequential", &O::sequential, "read windows in order instead of a seeded shuffle", OnResume::Refused, kAny},
      {"--profile", &O::profile, "time every step by phase and op family; print a table at the end and "
                                 "write OUT/profile.json (the first step or two are warm-up)",
       OnResume::NotSaved, kAny},
      {"--checkpoint-activations", &O::checkpoint_activations,
       "keep only each block's input in the forward and recompute the block in the backward "
       "(less memory, about a third more compute; bit-identical results)",
       OnResume::NotSaved, kAny},
      {"--checkpoint-every", &O::checkpoint_every,
       "recompute only blocks 0, K, 2K, ... (K >= 1; implies --checkpoint-activations)",
       OnResume::NotSaved, kNonNegative},
      {"--out", &O::out, "run folder: checkpoints, metrics.jsonl, data", OnResume::NotSaved, kAny},
      {"--save-every", &O::save_every, "checkpoint every N steps (0: at the end only)", OnResume::Free, kNonNegative},
      {"--keep", &O::keep, "keep the newest N checkpoints (0: all)", OnResume::Free, kNonNegative},
      {"--keep-every", &O::keep_every, "also keep every checkpoint whose step is a multiple of M", OnResume::Free,
       kNonNegative},
      {"--log-every", &O::log_every, "progress line every N steps", OnResume::Free, kNonNegative},
      {"--eval-every", &O::eval_every, "validation loss every N steps (0: at the end)", OnResume::Free, kNonNegative},
      {"--eval-batches", &O::eval_batches, "validation batches per evaluation (0: no validation)", OnResume::Free, kNonNegative},
      {"--val-fraction", &O::val_fraction, "held-out tail of a text corpus used for validation",
       OnResume::DataChange, kUnitOpen},
      {"--vocab-size", &O::vocab_size,
       "train a BPE tokenizer of this many tokens on the text --data, <|endoftext|>, <|im_start|> and "
       "<|im_end|> included (model vocab follows; 0: none)",
       OnResume::Refused, kNonNegative},
      {"--sample-tokens", &O::sample_tokens, "print a sample of N tokens at the end", OnResume::Free, kNonNegative},
      {"--sample-prompt", &O::sample_prompt, "prompt of the end-of-run sample", OnResume::Free, kAny},
      {"--dtype", &O::dtype, "matmul precision: float32, or bf16 (bfloat16 operands; float32 weights, grads, AdamW)",
       OnResume::Free, one_of({"float32", "bf16"})},
  };
  // The flags of training under mpirun, after the others.
  for (Field& f : distributed_fields()) table.push_back(std::move(f));
  return table;
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = all_fields();
  return table;
}

// `ember finetune`'s own fields, then the train fields that apply (by flag, in train's order).
const std::vector<Field>& finetune_fields() {
  static const std::vector<Field> table = [] {
    std::vector<Field> t = {
        {"--base", &O::base,
         "checkpoint to fine-tune (its config and tokenizer; a LoRA run's checkpoints name it); "
         "with --resume: the new path of a LoRA run's base that moved (checked by its sha256)",
         OnResume::NotSaved, kAny, true},
        {"--data", &O::data,
         "chat JSONL: one {\"messages\": [{\"role\", \"content\"}, ...]} or {\"text\"} per line",
         OnResume::DataChange, kAny, true},
        {"--full", &O::full, "train every parameter (no adapters); checkpoints are plain ones",
         OnResume::Fixed, kAny},
        {"--lora-r", &O::lora_r, "LoRA rank", OnResume::Fixed, kPositive},
        {"--lora-alpha", &O::lora_alpha, "LoRA alpha (the adapters' scale is alpha / r)",
         OnResume::Fixed, kPositive},
        {"--lora-dropout", &O::lora_dropout, "dropout on the adapters' input", OnResume::Fixed,
         kUnitOpen},
        {"--lora-targets", &O::lora_targets,
         "projections that get adapters: q, k, v, o, gate, up, down, head", OnResume::Fixed, kAny},
        {"--quantize", &O::quantize,
         "frozen base weights of the blocks: none, or NF4 (QLoRA): nf4, nf4-dq", OnResume::Fixed,
         one_of({"none", "nf4", "nf4-dq"})},
        {"--add-chat-tokens", &O::add_chat_tokens,
         "the base tokenizer lacks <|im_start|> / <|im_end|>: append them (new embedding "
         "rows, trained)",
         OnResume::Fixed, kAny},
        {"--val-fraction", &O::val_fraction,
         "share of the conversations held out for validation (seeded; 0: none)",
         OnResume::DataChange, kUnitOpen},
        {"--seq-len", &O::seq_len,
         "tokens per row: a conversation is cut to its first seq-len + 1 ids (default: at most "
         "the base's max_seq_len)",
         OnResume::Refused, kPositive},
        {"--seed", &O::seed, "seed of the adapters, the held-out split, the data order and dropout",
         OnResume::Refused, kAny},
        {"--sequential", &O::sequential,
         "read the conversations in file order instead of a seeded shuffle", OnResume::Refused,
         kAny},
    };
    // clang-format off
    for (const char* flag : {"--resume", "--allow-data-change", "--out", "--steps", "--batch-size",
                             "--grad-accum", "--lr", "--min-lr", "--warmup", "--schedule",
                             "--weight-decay", "--beta1", "--beta2", "--clip", "--save-every",
                             "--keep", "--keep-every", "--log-every",
                             "--eval-every", "--dtype", "--profile", "--zero", "--bucket-mb",
                             "--check-every", "--checkpoint-activations", "--checkpoint-every",
                             "--tp", "--pp", "--micro-batches", "--pp-layers", "--pp-schedule"}) {
      // clang-format on
      const auto& train = fields();
      const auto it = std::find_if(train.begin(), train.end(), [&](const Field& f) {
        return std::string_view(f.flag) == flag;
      });
      t.push_back(*it);
    }
    return t;
  }();
  return table;
}

// `own` fields, then finetune's, read as a command on preference pairs (ember align, reward).
std::vector<Field> pair_fields(std::vector<Field> t) {
  for (Field f : finetune_fields()) {
    if (std::string_view(f.flag) == "--data") {
      f.help = "preference JSONL: one {\"prompt\", \"chosen\", \"rejected\"} per line "
               "(chat messages or strings)";
    } else if (std::string_view(f.flag) == "--val-fraction") {
      f.help = "share of the pairs held out for validation (seeded; 0: none)";
    } else if (std::string_view(f.flag) == "--sequential") {
      f.help = "read the pairs in file order instead of a seeded shuffle";
    }
    t.push_back(f);
  }
  return t;
}

// `ember align`'s own fields, then finetune's (its --data names preference pairs).
const std::vector<Field>& align_fields() {
  static const std::vector<Field> table = pair_fields({
      {"--loss", &O::loss, "the pair loss: dpo, ipo, simpo or orpo", OnResume::Fixed,
       one_of({"dpo", "ipo", "simpo", "orpo"})},
      {"--beta", &O::beta, "the loss's beta (default: simpo 2, the others 0.1)", OnResume::Free,
       kPositive},
      {"--label-smoothing", &O::label_smoothing, "dpo: the share e of flipped preferences",
       OnResume::Free, kHalfOpen},
      {"--simpo-gamma", &O::simpo_gamma, "simpo: the target reward margin gamma", OnResume::Free,
       kAny},
      {"--sft-weight", &O::sft_weight, "adds this times the chosen side's mean token NLL",
       OnResume::Free, kNonNegative},
      {"--ref", &O::ref,
       "the reference model's checkpoint (dpo, ipo; default: the starting model, for LoRA its "
       "base without adapters)",
       OnResume::Fixed, kAny, true},
  });
  return table;
}

// `ember rl`'s own fields, then finetune's that apply to it (--prompts is --data's field: the
// data; no --seq-len, --grad-accum or parallel layout).
const std::vector<Field>& rl_fields() {
  static const std::vector<Field> table = [] {
    std::vector<Field> t = {
        {"--algo", &O::algo, "grpo (group-normalised rewards, no value head) or ppo (a value head, GAE)",
         OnResume::Fixed, one_of({"grpo", "ppo"})},
        {"--prompts", &O::data,
         "prompt JSONL: one {\"prompt\": messages or \"text\", \"answer\": \"...\"} per line",
         OnResume::DataChange, kAny, true, "data"},
        {"--reward", &O::reward_rule,
         "match: the reward is 1 when the completion's text contains the prompt's \"answer\", else 0",
         OnResume::Fixed, kAny},
        {"--reward-model", &O::reward_model,
         "the reward: the score of prompt then completion under this reward model (ember reward's)",
         OnResume::Fixed, kAny, true},
        {"--group-size", &O::group_size, "completions sampled per prompt (G >= 2)", OnResume::Free,
         between(2, HUGE_VAL)},
        {"--temperature", &O::temperature, "sampling temperature (the log-probabilities are of logits / it)",
         OnResume::Free, kPositive},
        {"--max-tokens", &O::max_tokens, "new tokens per completion at most (the stop token included)",
         OnResume::Free, kPositive},
        {"--iterations", &O::iterations, "updates per step on the step's completions", OnResume::Free,
         kPositive},
        {"--clip-ratio", &O::clip_ratio, "eps: the ratio is clipped to [1 - eps, 1 + eps]", OnResume::Free,
         {0, 1, true, true, {}}},
        {"--kl", &O::kl, "grpo: the weight of the k3 term; ppo: of the per-token KL reward",
         OnResume::Free, kNonNegative},
        {"--vf-coef", &O::vf_coef, "ppo: the weight of the value loss", OnResume::Free, kNonNegative},
        {"--rollouts-out", &O::rollouts_out,
         "write each step's prompts, completions, rewards, advantages and old log-probabilities "
         "here (JSON lines)",
         OnResume::NotSaved, kAny},
    };
    for (Field f : finetune_fields()) {
      const std::string_view flag = f.flag;
      if (flag == "--data" || flag == "--seq-len" || flag == "--grad-accum" || flag == "--tp" ||
          flag == "--pp" || flag == "--micro-batches" || flag == "--pp-layers" ||
          flag == "--pp-schedule" || flag == "--add-chat-tokens")
        continue;
      if (flag == "--batch-size") f.help = "prompts per step (per rank)";
      if (flag == "--val-fraction")
        f.help = "share of the prompts held out: their greedy completions' reward is the validation";
      if (flag == "--sequential") f.help = "read the prompts in file order instead of a seeded shuffle";
      if (flag == "--seed") f.help = "seed of the adapters, the held-out split, the prompt order and the sampling";
      t.push_back(f);
    }
    return t;
  }();
  return table;
}

// `ember reward`'s own fields, then finetune's (its --data names preference pairs).
const std::vector<Field>& reward_fields() {
  static const std::vector<Field> table = pair_fields({
      {"--center-rewards", &O::center_rewards,
       "adds c (r_c + r_r)^2 to each pair's loss, pulling the scores towards 0", OnResume::Free,
       kNonNegative},
  });
  return table;
}

const std::vector<Field>& fields_of(const TrainOptions& o) {
  if (o.reward) return reward_fields();
  if (o.align) return align_fields();
  if (o.rl) return rl_fields();
  return o.finetune ? finetune_fields() : fields();
}

// "--batch-size" -> "batch_size": the key in the checkpoint and in TrainOptions::given.
std::string key_of(const Field& f) {
  if (f.key) return f.key;
  std::string name = std::string(f.flag).substr(2);
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

// The shortest text that reads back as the same number.
std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string value_text(const Field& f, const TrainOptions& o) {
  return std::visit(
      [&](auto m) -> std::string {
        const auto& v = o.*m;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) return v;
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, double>) return number_text(v);
        else return std::to_string(v);
      },
      f.member);
}

std::string json_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_float()) return number_text(j.get<double>());
  return j.dump();
}

std::string allowed_text(const Allowed& a) {
  if (!a.names.empty()) {
    std::string s = "one of ";
    for (size_t i = 0; i < a.names.size(); ++i) s += (i ? ", " : "") + a.names[i];
    return s;
  }
  if (std::isfinite(a.lo) && std::isfinite(a.hi)) {
    return std::string("in ") + (a.lo_open ? "(" : "[") + number_text(a.lo) + ", " + number_text(a.hi) +
           (a.hi_open ? ")" : "]");
  }
  return std::string(a.lo_open ? "> " : ">= ") + number_text(a.lo);
}

void check_field(const Field& f, const TrainOptions& o) {
  const Allowed& a = f.allowed;
  std::visit(
      [&](auto m) {
        const auto& v = o.*m;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (a.names.empty()) return;
          for (const std::string& n : a.names) {
            if (v == n) return;
          }
          throw Error(detail::concat(f.flag, " must be ", allowed_text(a), "; got '", v, "'"));
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          const double x = static_cast<double>(v);
          const bool ok = std::isfinite(x) && (a.lo_open ? x > a.lo : x >= a.lo) && (a.hi_open ? x < a.hi : x <= a.hi);
          EMBER_CHECK(ok, f.flag, " must be ", allowed_text(a), std::is_same_v<T, double> ? " and finite" : "",
                      "; got ", value_text(f, o));
        }
      },
      f.member);
}

// ember rl's rules across fields: one reward, and what the rollouts can read.
void validate_rl_options(const TrainOptions& o) {
  EMBER_CHECK(o.reward_rule.empty() || o.reward_rule == "match",
              "--reward must be match (or give --reward-model); got '", o.reward_rule, "'");
  EMBER_CHECK(o.reward_rule.empty() != o.reward_model.empty() || !o.resume.empty(),
              o.reward_rule.empty() ? "a reward is required: --reward match or --reward-model RM"
                                    : "--reward match and --reward-model exclude each other: give one");
  EMBER_CHECK(o.zero <= 2, "--zero ", o.zero,
              " shards the parameters, which the rollouts read whole: ember rl takes --zero 0, 1 or 2");
}

// ember finetune's rules across fields: where the run starts, and LoRA options only for LoRA.
void validate_finetune_options(const TrainOptions& o) {
  EMBER_CHECK(
      !o.base.empty() || !o.resume.empty(),
      "--base is required: the checkpoint to fine-tune (or --resume DIR to continue a run)");
  EMBER_CHECK(!o.resume.empty() || !o.data.empty(), o.rl ? "--prompts" : "--data", " is required: the ",
              o.rl      ? "prompts (JSONL) to sample completions of"
              : o.reward  ? "preference pairs (JSONL) to train the reward model on"
              : o.align ? "preference pairs (JSONL) to align on"
                        : "chat JSONL to fine-tune on");
  if (!o.full) {
    nn::parse_lora_targets(o.lora_targets);  // an Error naming --lora-targets and the known names
    return;
  }
  EMBER_CHECK(o.quantize == "none", "--quantize ", o.quantize,
              " quantizes the frozen base of LoRA; with --full every weight is trained");
  for (const char* lora : {"lora_r", "lora_alpha", "lora_dropout", "lora_targets"}) {
    std::string flag = std::string("--") + lora;
    std::replace(flag.begin(), flag.end(), '_', '-');
    EMBER_CHECK(!o.given.count(lora), flag,
                " sets LoRA adapters; --full trains every parameter without them");
  }
}

}  // namespace

std::vector<OptionFlag> option_flags(TrainOptions& o) {
  std::vector<OptionFlag> flags;
  for (const Field& f : fields_of(o)) {
    std::visit([&](auto m) { flags.push_back({f.flag, f.help, &(o.*m), f.existing_file, key_of(f)}); }, f.member);
  }
  return flags;
}

void validate_options(const TrainOptions& o) {
  for (const Field& f : fields_of(o)) check_field(f, o);
  if (o.finetune) validate_finetune_options(o);
  if (o.rl) validate_rl_options(o);
  EMBER_CHECK(o.min_lr <= o.lr, "--min-lr must be at most --lr (", number_text(o.lr), "); got ",
              number_text(o.min_lr));
  EMBER_CHECK(o.vocab_size == 0 || o.vocab_size >= 259,
              "--vocab-size must be 0 (no tokenizer training) or at least 259 (the 256 byte tokens, <|endoftext|>, "
              "<|im_start|> and <|im_end|>); got ", o.vocab_size);
  EMBER_CHECK(o.checkpoint_every >= 1 || !o.given.count("checkpoint_every"),
              "--checkpoint-every must be >= 1 (1: every block); got ", o.checkpoint_every);
  EMBER_CHECK(o.tokenizer.empty() || o.vocab_size == 0,
              "--tokenizer and --vocab-size exclude each other: give the tokenizer the shards were made with, or "
              "train one on text");
}

json options_to_json(const TrainOptions& o) {
  json j = json::object();
  for (const Field& f : fields_of(o)) {
    if (f.resume == OnResume::NotSaved) continue;
    std::visit([&](auto m) { j[key_of(f)] = o.*m; }, f.member);
  }
  return j;
}

std::vector<std::string> restore_options(const json& saved, TrainOptions& o) {
  std::vector<std::string> notes;
  for (const Field& f : fields_of(o)) {
    const std::string key = key_of(f);
    if (f.resume == OnResume::NotSaved || !saved.contains(key)) continue;
    const json& was = saved.at(key);
    std::visit(
        [&](auto m) {
          auto& v = o.*m;
          if (!o.given.count(key)) {
            was.get_to(v);
            return;
          }
          if (json(v) == was) return;
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
            // The same file by another name (./chat.jsonl, an absolute path, a link): no change.
            if (is_path_key(key) && was.is_string() && same_path(v, was.get<std::string>())) return;
          }
          const std::string change = detail::concat(f.flag, " ", value_text(f, o), " overrides the run's ",
                                                    json_text(was));
          if (f.resume == OnResume::Refused) {
            throw Error(detail::concat("--resume: ", f.flag, " ", value_text(f, o), " differs from the run's ",
                                       json_text(was), "; it changes which data the rest of the run reads "
                                       "(resume without it, or start a new run with ",
                                       o.finetune ? "--base" : "--init-from", ")"));
          }
          if (f.resume == OnResume::Fixed) {
            throw Error(detail::concat("--resume: ", f.flag, " ", value_text(f, o),
                                       " differs from the run's ", json_text(was),
                                       "; it defines the model being trained (start a new run "
                                       "with --base)"));
          }
          if (f.resume == OnResume::DataChange && !o.allow_data_change) {
            throw Error(detail::concat("--resume: ", f.flag, " ", value_text(f, o), " differs from the run's ",
                                       json_text(was), "; give --allow-data-change to train on it"));
          }
          notes.push_back("--resume: " + change);
        },
        f.member);
  }
  return notes;
}

void absolutize_paths(TrainOptions& o) {
  for (const Field& f : fields_of(o)) {
    if (!is_path_key(key_of(f))) continue;
    std::string& path = o.*std::get<std::string TrainOptions::*>(f.member);
    path = absolute_path(path);
  }
}

std::vector<std::pair<std::string, std::string>> path_option_values(const TrainOptions& o) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const Field& f : fields_of(o))
    if (is_path_key(key_of(f))) values.emplace_back(f.flag, value_text(f, o));
  return values;
}

std::vector<std::pair<std::string, std::string>> option_values(const TrainOptions& o) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const Field& f : fields_of(o)) values.emplace_back(f.flag, value_text(f, o));
  return values;
}

const char* command_name(const TrainOptions& o) {
  return o.reward ? "reward" : o.align ? "align" : o.rl ? "rl" : o.finetune ? "finetune" : "train";
}

int64_t checkpoint_interval(const TrainOptions& o) {
  if (o.checkpoint_every > 0) return o.checkpoint_every;
  return o.checkpoint_activations ? 1 : 0;
}

std::string run_folder(const TrainOptions& o) {
  return o.resume.empty() || o.given.count("out") ? o.out : o.resume;
}

}  // namespace ember::apps
