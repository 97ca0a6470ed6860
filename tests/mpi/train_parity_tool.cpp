// Helper of train_parity.cmake (data-parallel `ember train` against one process):
//   train_parity_tool data DIR [SEED] writes DIR/tiny.json (no dropout) and DIR/train.bin
//                                     (20000 random tokens; SEED 7 by default)
//   train_parity_tool bad-state CKPT  rewrites CKPT with /train state "{" (valid digest:
//                                     as another tool would write it)
//   train_parity_tool compare A B [LIMIT]
//                                     every /model tensor of checkpoint A within a
//                                     relative error of LIMIT (1e-5 by default) of B's
//                                     (exit 1 otherwise)
//   train_parity_tool compare-state A B LIMIT
//                                     the same for /model and /optim's moments, and
//                                     equal optimizer step counts
//   train_parity_tool chat DIR [KIND] writes DIR/base.h5 and DIR/chat.jsonl; KIND untied: a
//                                     base with an lm_head of its own, moe: an MoE base
//   train_parity_tool pairs DIR       writes DIR/base.h5 and DIR/pairs.jsonl (24 pairs)
//   train_parity_tool prompts DIR     writes DIR/base.h5, DIR/pairs.jsonl and DIR/prompts.jsonl
//                                     (16 RL prompts)
//   train_parity_tool rollouts A B    --rollouts-out files A and B hold the same completions in
//                                     the same order (step, prompt, ids) with rewards,
//                                     advantages and logp_old within 1e-5 absolute
//   (tests/finetune_testing.h)
//   train_parity_tool metrics A B [N] run folders A and B logged the same steps with the same
//                                     trained tokens (train: tokens), loss (relative 1e-6),
//                                     gradient norm (relative N, default 1e-5: AdamW turns the
//                                     rounding of a gradient near 0 into a whole step, so the
//                                     norm drifts first) and, where both validated, validation
//                                     loss (1e-6); ember align's rewards/margins and
//                                     rewards/accuracy, ember reward's margin and accuracy
//                                     (and their val_ values) within 1e-6 absolute; ember rl's
//                                     reward, kl, clip_fraction (and val_reward) within 1e-5,
//                                     its loss within 1e-6 absolute
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/finetune_testing.h"
#include "data/token_shard.h"
#include "nn/checkpoint_file.h"

using namespace ember;

namespace {

// The records of OUT/metrics.jsonl that hold a training loss.
std::vector<nlohmann::json> step_records(const std::filesystem::path& out) {
  std::ifstream f(out / "metrics.jsonl");
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss")) records.push_back(std::move(j));
  }
  return records;
}

bool near(double a, double b, double rel) {
  return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b));
}

// Tokens a step record counts: finetune's trained tokens, train's tokens.
int tokens_of(const nlohmann::json& j) {
  return j.contains("trained_tokens") ? j.at("trained_tokens").get<int>() : j.at("tokens").get<int>();
}

// Exit code of `metrics A B [N]`: 0 when every step agrees.
int compare_metrics(const char* a_dir, const char* b_dir, double norm_rel) {
  const auto a = step_records(a_dir), b = step_records(b_dir);
  if (a.empty() || a.size() != b.size()) {
    std::printf("step records: %zu vs %zu\n", a.size(), b.size());
    return 1;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const double la = a[i].at("loss"), lb = b[i].at("loss"), na = a[i].at("grad_norm"),
                 nb = b[i].at("grad_norm");
    // ember rl's loss is a signed sum near 0 (advantages of both signs): absolute 1e-6 there.
    const bool rl = a[i].contains("kl");
    bool same = a[i].at("step") == b[i].at("step") && tokens_of(a[i]) == tokens_of(b[i]) &&
                (rl ? std::abs(la - lb) <= 1e-6 : near(la, lb, 1e-6)) && near(na, nb, norm_rel);
    std::printf("step %d: loss %.9g vs %.9g, grad norm %.9g vs %.9g, trained tokens %d vs %d\n",
                a[i].at("step").get<int>(), la, lb, na, nb, tokens_of(a[i]), tokens_of(b[i]));
    if (a[i].contains("val_loss") && b[i].contains("val_loss")) {  // both validated at this step
      const double va = a[i].at("val_loss"), vb = b[i].at("val_loss");
      std::printf("step %d: validation loss %.9g vs %.9g\n", a[i].at("step").get<int>(), va, vb);
      same = same && near(va, vb, 1e-6);
    }
    for (const char* key : {"rewards/margins", "rewards/accuracy", "val_rewards/margins",
                            "val_rewards/accuracy",  // ember align's records, ember reward's:
                            "margin", "accuracy", "val_margin", "val_accuracy"}) {
      if (!a[i].contains(key) || !b[i].contains(key)) continue;
      const double ra = a[i].at(key), rb = b[i].at(key);
      std::printf("step %d: %s %.9g vs %.9g\n", a[i].at("step").get<int>(), key, ra, rb);
      same = same && std::abs(ra - rb) <= 1e-6;
    }
    for (const char* key : {"reward", "kl", "clip_fraction", "val_reward"}) {  // ember rl's
      if (!a[i].contains(key) || !b[i].contains(key)) continue;
      const double ra = a[i].at(key), rb = b[i].at(key);
      std::printf("step %d: %s %.9g vs %.9g\n", a[i].at("step").get<int>(), key, ra, rb);
      same = same && std::abs(ra - rb) <= 1e-5;
    }
    if (!same) return 1;
  }
  return 0;
}

// The numbers of a --rollouts-out value (a number or a list of them).
std::vector<double> numbers(const nlohmann::json& v) {
  return v.is_array() ? v.get<std::vector<double>>() : std::vector<double>{v.get<double>()};
}

// Exit code of `rollouts A B`: 0 when both files hold the same completions, values within 1e-5.
int compare_rollouts(const char* a_path, const char* b_path) {
  std::ifstream fa(a_path), fb(b_path);
  std::string la, lb;
  int64_t lines = 0;
  double worst = 0;
  while (std::getline(fa, la)) {
    if (!std::getline(fb, lb)) break;
    ++lines;
    const nlohmann::json a = nlohmann::json::parse(la), b = nlohmann::json::parse(lb);
    for (const char* key : {"step", "prompt", "prompt_ids", "completion_ids"}) {
      if (a.at(key) != b.at(key)) {
        std::printf("line %lld: %s differs: %s vs %s\n", static_cast<long long>(lines), key,
                    a.at(key).dump().c_str(), b.at(key).dump().c_str());
        return 1;
      }
    }
    for (const char* key : {"reward", "advantage", "logp_old"}) {
      const std::vector<double> x = numbers(a.at(key)), y = numbers(b.at(key));
      if (x.size() != y.size()) return 1;
      for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
    }
  }
  const bool both_ended = !std::getline(fa, la) && !std::getline(fb, lb);
  std::printf("%lld completions, values within %.3g%s\n", static_cast<long long>(lines), worst,
              both_ended ? "" : "; the files differ in length");
  return lines > 0 && both_ended && worst <= 1e-5 ? 0 : 1;
}

// Every tensor of `a` within a relative error of `limit` of b's (and b has no other): the worst.
// -1 when one is missing or over the limit (printed).
double compare_tensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b,
                       const char* b_name, double limit) {
  if (a.size() != b.size()) {
    std::printf("different tensor counts: %zu vs %zu\n", a.size(), b.size());
    return -1;
  }
  double worst = 0;
  for (const auto& [name, ta] : a) {
    const auto it = b.find(name);
    if (it == b.end()) {
      std::printf("%s: missing in %s\n", name.c_str(), b_name);
      return -1;
    }
    const std::vector<float> x = ta.to_vector<float>(), y = it->second.to_vector<float>();
    if (x.size() != y.size()) {
      std::printf("%s: sizes differ\n", name.c_str());
      return -1;
    }
    double diff = 0, norm = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      norm += double(y[i]) * y[i];
    }
    const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
    worst = std::max(worst, rel);
    if (!(rel <= limit)) {
      std::printf("%s: relative error %.3g (limit %.3g)\n", name.c_str(), rel, limit);
      return -1;
    }
  }
  return worst;
}

// compare (the model's tensors) and compare-state (also the optimizer's moments, its step and
// every parameter's update count, which must be equal).
int compare_checkpoints(const char* a_path, const char* b_path, double limit, bool with_state) {
  const nn::Checkpoint a = nn::read_checkpoint(a_path, with_state), b = nn::read_checkpoint(b_path, with_state);
  const double model = compare_tensors(a.model, b.model, b_path, limit);
  if (model < 0) return 1;
  std::printf("%zu tensors equal within %.3g\n", a.model.size(), model);
  if (!with_state) return 0;
  const double state = compare_tensors(a.optim, b.optim, b_path, limit);
  if (state < 0) return 1;
  if (a.optim_step != b.optim_step || a.optim_param_steps != b.optim_param_steps) {
    std::printf("the optimizer's step counts differ\n");
    return 1;
  }
  std::printf("%zu optimizer tensors equal within %.3g, step counts equal\n", a.optim.size(), state);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "data" && (argc == 3 || argc == 4)) {
    const std::filesystem::path dir = argv[2];
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "tiny.json") << R"({"vocab_size": 64, "d_model": 16, "n_layers": 2, "n_heads": 2,
  "ffn_hidden": 32, "max_seq_len": 32, "qk_norm": true, "z_loss_coef": 1e-4, "dropout": 0.0})";
    const int64_t n = 20000;
    const uint64_t seed = argc == 4 ? std::stoull(argv[3]) : 7;
    const Tensor r = Tensor::rand({n}, seed, 0, DType::Float64, 0, 64);
    std::vector<uint32_t> tokens(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<uint32_t>(r.at({i}));
    data::write_shard((dir / "train.bin").string(), tokens, 64);
    return 0;
  }
  if (mode == "bad-state" && argc == 3) {
    nn::Checkpoint c = nn::read_checkpoint(argv[2], true);
    c.train_state.emplace(1, '{');  // "{"
    std::filesystem::remove(argv[2]);
    nn::write_checkpoint(argv[2], c);
    return 0;
  }
  if (mode == "compare" && (argc == 4 || argc == 5))
    return compare_checkpoints(argv[2], argv[3], argc == 5 ? std::stod(argv[4]) : 1e-5, false);
  if (mode == "compare-state" && argc == 5) return compare_checkpoints(argv[2], argv[3], std::stod(argv[4]), true);
  if (mode == "chat" && (argc == 3 || argc == 4)) {
    const std::string kind = argc == 4 ? argv[3] : "";
    if (kind != "" && kind != "untied" && kind != "moe") {
      std::fprintf(stderr, "train_parity_tool chat: KIND is untied or moe, not %s\n", kind.c_str());
      return 2;
    }
    std::filesystem::create_directories(argv[2]);
    testing::write_chat_base((std::filesystem::path(argv[2]) / "base.h5").string(), kind == "moe", 3,
                             kind == "untied");
    testing::write_chat_data((std::filesystem::path(argv[2]) / "chat.jsonl").string());
    return 0;
  }
  if (mode == "pairs" && argc == 3) {
    std::filesystem::create_directories(argv[2]);
    testing::write_chat_base((std::filesystem::path(argv[2]) / "base.h5").string());
    testing::write_pair_data((std::filesystem::path(argv[2]) / "pairs.jsonl").string(), 24);
    return 0;
  }
  if (mode == "prompts" && argc == 3) {
    std::filesystem::create_directories(argv[2]);
    testing::write_chat_base((std::filesystem::path(argv[2]) / "base.h5").string());
    testing::write_pair_data((std::filesystem::path(argv[2]) / "pairs.jsonl").string(), 24);
    testing::write_rl_prompts((std::filesystem::path(argv[2]) / "prompts.jsonl").string(), 16);
    return 0;
  }
  if (mode == "rollouts" && argc == 4) return compare_rollouts(argv[2], argv[3]);
  if (mode == "metrics" && (argc == 4 || argc == 5))
    return compare_metrics(argv[2], argv[3], argc == 5 ? std::stod(argv[4]) : 1e-5);
  std::fprintf(
      stderr,
      "usage: train_parity_tool data DIR [SEED] | bad-state CKPT | compare A B [LIMIT] | "
      "compare-state A B LIMIT | chat DIR [KIND] | "
      "pairs DIR | prompts DIR | rollouts A B | "
      "metrics A B [N]\n");
  return 2;
}
