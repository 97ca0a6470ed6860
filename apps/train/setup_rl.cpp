// `ember rl`'s setup (docs/cli.md#rl-from-a-reward): the prompt file read and rendered with the
// base's tokenizer, split into training and held-out prompts (the seeded --val-fraction choice
// of fine-tuning), each checked to leave --max-tokens of the context; the reward model's
// vocabulary checked against the policy's; after the model: the reward model and, for --full,
// the reference loaded, and --rollouts-out cut back to the resumed step. Every rank reads the
// prompts itself.
#include <filesystem>
#include <fstream>

#include "apps/common/model_io.h"
#include "apps/train/rl_run.h"
#include "apps/train/run_paths.h"
#include "core/io/atomic_file.h"
#include "core/io/hdf5_file.h"
#include "data/held_out.h"
#include "nn/checkpoint_file.h"

namespace ember::apps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The value head's draws when no reward model gives it: a stream of --seed of its own.
constexpr uint64_t kValueHeadStream = 0x7a1e4eadull;

nn::RlOptions loss_options(const TrainOptions& o) {
  nn::RlOptions l;
  l.algo = nn::parse_rl_algo(o.algo);
  l.clip_ratio = o.clip_ratio;
  l.kl = o.kl;
  l.vf_coef = o.vf_coef;
  nn::check_rl_options(l);
  return l;
}

// The prompts rendered; each must leave --max-tokens in the context; --reward match needs an
// answer on every line.
std::vector<RlItem> render_prompts(const TrainRun& run, const std::vector<data::RlPrompt>& lines) {
  const TrainOptions& o = run.o;
  const int64_t context = run.cfg.max_seq_len;
  std::vector<RlItem> items;
  for (size_t i = 0; i < lines.size(); ++i) {
    const data::RlPrompt& p = lines[i];
    const std::string where = detail::concat(o.data, " line ", p.line);
    EMBER_CHECK(o.reward_rule != "match" || p.answer, where,
                ": \"answer\": missing (--reward match compares the completion with it)");
    if (!p.is_text) {
      try {
        data::chat_specials(*run.tokenizer);
      } catch (const Error& e) {
        throw Error(run.start_path + ": " + e.what() + " (the prompts are chat messages)");
      }
    }
    RlItem item{data::render_rl_prompt(*run.tokenizer, p), p.answer, p, static_cast<int64_t>(i)};
    const int64_t n = static_cast<int64_t>(item.ids.size());
    EMBER_CHECK(n >= 1, where, ": the prompt renders to no token");
    EMBER_CHECK(n + o.max_tokens <= context, where, ": the prompt's ", n,
                " tokens and --max-tokens ", o.max_tokens, " exceed the model's context of ",
                context, " tokens (shorten the prompt or lower --max-tokens)");
    items.push_back(std::move(item));
  }
  return items;
}

// --reward-model: a reward model (config "reward") scoring the policy's token ids.
void check_reward_model(const TrainRun& run) {
  const TrainOptions& o = run.o;
  if (o.reward_model.empty()) return;
  const nn::ModelConfig rm = nn::read_checkpoint_config(o.reward_model);
  EMBER_CHECK(!rm.reward.empty(), "--reward-model ", o.reward_model,
              ": not a reward model (its config has no \"reward\"; ember reward writes one)");
  const nn::Checkpoint c = read_base_without_weights(o.reward_model);
  const std::string policy = run.tokenizer->to_json();
  EMBER_CHECK(
      c.tokenizer_json.empty() || data::Tokenizer::from_json(c.tokenizer_json).to_json() == policy,
      "--reward-model ", o.reward_model,
      ": its tokenizer differs from the base's (it must read the policy's text as its own "
      "training did)");
  EMBER_CHECK(o.algo != "ppo" || rm.d_model == run.cfg.d_model, "--reward-model ", o.reward_model,
              ": its d_model ", rm.d_model, " differs from the base's ", run.cfg.d_model,
              " (ppo's value head starts as its score head)");
}

// --rollouts-out on --resume: the lines of the steps after the checkpoint go (they are taken
// again); a new run starts the file empty. Rank 0.
void trim_rollouts_file(const std::string& path, int64_t step) {
  std::string kept;
  if (step > 0 && fs::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      const json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.value("step", int64_t{0}) <= step) kept += line + "\n";
    }
  }
  write_file_atomically(path, kept);
}

}  // namespace

int64_t rl_prompt_at(const TrainRun& run, int64_t step, int64_t b) {
  const int64_t slot = (step * run.data_world + run.data_rank) * run.o.batch_size + b;
  const RlState& rl = *run.rl;
  return rl.order ? (*rl.order)(slot) : slot % static_cast<int64_t>(rl.train.size());
}

nlohmann::json rl_config(const TrainOptions& o) {
  json j = {{"algo", o.algo},
            {"reward", o.reward_model.empty() ? o.reward_rule : o.reward_model},
            {"group_size", o.group_size},
            {"temperature", o.temperature},
            {"max_tokens", o.max_tokens},
            {"iterations", o.iterations},
            {"clip_ratio", o.clip_ratio},
            {"kl", o.kl}};
  if (o.algo == "ppo") j["vf_coef"] = o.vf_coef;
  return j;
}

void open_rl_prompts(TrainRun& run) {
  TrainOptions& o = run.o;
  run.rl = std::make_shared<RlState>();
  RlState& rl = *run.rl;
  agreed(run.comm, [&] {
    if (!o.reward_model.empty()) o.reward_model = absolute_path(o.reward_model);
    if (!o.rollouts_out.empty()) rl.rollouts_out = absolute_path(o.rollouts_out);
    rl.loss = loss_options(o);
    check_reward_model(run);
    if (o.resume.empty()) run.cfg.rl.clear();  // a base that was itself RL-tuned: its head goes
    const std::vector<RlItem> items = render_prompts(run, data::read_rl_prompt_file(o.data));
    const int64_t n = static_cast<int64_t>(items.size());
    const std::vector<bool> held = data::held_out_items(n, o.val_fraction, o.seed);
    for (int64_t i = 0; i < n; ++i)
      (held[static_cast<size_t>(i)] ? rl.held_out : rl.train)
          .push_back(items[static_cast<size_t>(i)]);
    EMBER_CHECK(!rl.train.empty(), o.data, ": every one of its ", n,
                " prompts is held out by --val-fraction ", o.val_fraction,
                "; none is left to train on");
    run.held_out = static_cast<int64_t>(rl.held_out.size());
    if (!o.sequential) rl.order.emplace(static_cast<int64_t>(rl.train.size()), o.seed);
    for (const std::string_view stop : {data::kImEnd, data::kEndOfText}) {
      if (const auto id = run.tokenizer->find_special(stop)) rl.stop_tokens.push_back(*id);
    }
  });
}

std::shared_ptr<nn::ValueHead> new_value_head(const TrainRun& run) {
  const TrainOptions& o = run.o;
  if (o.algo != "ppo") return nullptr;
  if (!o.reward_model.empty()) {
    const H5File f(o.reward_model, H5File::Mode::Read);
    EMBER_CHECK(f.exists("/model/score.weight"), "--reward-model ", o.reward_model,
                ": missing tensor /model/score.weight");
    return std::make_shared<nn::ValueHead>(f.read_tensor("/model/score.weight").to(DType::Float32));
  }
  Generator head(o.seed ^ kValueHeadStream);
  return std::make_shared<nn::ValueHead>(run.cfg.d_model, head);
}

void prepare_rl(TrainRun& run) {
  const TrainOptions& o = run.o;
  RlState& rl = *run.rl;
  agreed(run.comm, [&] {
    if (!o.reward_model.empty()) {
      LoadedModel rm = load_reward_model(o.reward_model);
      rl.reward_model = std::move(rm.model);
      rl.reward_tokenizer = std::move(rm.tokenizer);
    }
    if (o.full) {  // the starting model, frozen, without a value head
      LoadedModel ref = load_model(run.finetune_base);
      rl.reference = std::move(ref.model);
    }
    if (run.root && !rl.rollouts_out.empty()) trim_rollouts_file(rl.rollouts_out, run.step);
  });
}

}  // namespace ember::apps
