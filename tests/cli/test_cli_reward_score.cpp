// `ember reward --score` (docs/cli.md#scoring-with-a-reward-model) on a tiny reward checkpoint
// written here (the chat base's config with "reward", its score.weight drawn by the model):
// a pair line and completion lines in both forms, one cut at max_seq_len + 1, each equal to a
// plain recomputation (the side alone, unpadded: final-norm output at its last input position
// dotted with score.weight in double); every bad input one "ember: error:" line naming the file,
// the line and the field, exit 1, nothing on stdout; a checkpoint that is not a reward model.
// And the refusals: generate, chat, loss, eval, evaluate and serve given a reward checkpoint.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "cli_run.h"
#include "finetune_testing.h"
#include "nn/checkpoint_file.h"

namespace fs = std::filesystem;
using ember::testing::CliRun;
using ember::testing::run_cli;
using ember::testing::TempDir;
using nlohmann::json;

namespace {

// The chat base (max_seq_len 64) as a reward model, max_seq_len shortened to 24 so that a line
// below is cut.
ember::nn::ModelConfig reward_config() {
  ember::nn::ModelConfig c = ember::testing::chat_base_config();
  c.max_seq_len = 24;
  c.reward = R"({"center_rewards":0.0})";
  return c;
}

void write_reward_checkpoint(const std::string& path) {
  ember::nn::Checkpoint c;
  c.config = reward_config();
  c.model = ember::nn::Transformer(c.config, 4).state_dict();
  c.tokenizer_json = ember::testing::chat_tokenizer().to_json();
  ember::nn::write_checkpoint(path, c);
}

// The score of one side by hand: ids fed alone (its first min(L, T) of them), the final-norm
// output at the last of them, dotted with score.weight in double.
double plain_score(const std::string& checkpoint, const std::vector<int64_t>& side) {
  const ember::nn::Checkpoint c = ember::nn::read_checkpoint(checkpoint, false);
  const auto model = ember::nn::model_from_checkpoint(c, checkpoint);
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(side.size()), c.config.max_seq_len);
  const std::vector<int64_t> ids(side.begin(), side.begin() + n);
  ember::NoGradGuard no_grad;
  const ember::Tensor h =
      model->hidden_states(ember::Tensor::from_vector(ids, {1, n})).data().contiguous();
  const ember::Tensor w = c.model.at("score.weight").contiguous();
  const int64_t d = c.config.d_model;
  double r = 0;
  for (int64_t i = 0; i < d; ++i)
    r += static_cast<double>(h.data<float>()[(n - 1) * d + i]) * w.data<float>()[i];
  return r;
}

// Byte tokenizer ids: the bytes of s.
std::vector<int64_t> bytes(const std::string& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}
constexpr int64_t kEot = 256, kStart = 257, kEnd = 258;

std::vector<int64_t> chat_side(const std::string& user, const std::string& answer) {
  std::vector<int64_t> out;
  for (const auto& [role, text] : {std::pair<std::string, std::string>{"user", user}, {"assistant", answer}}) {
    out.push_back(kStart);
    for (int64_t b : bytes(role + "\n" + text)) out.push_back(b);
    out.push_back(kEnd);
    out.push_back('\n');
  }
  return out;
}

std::vector<int64_t> text_side(const std::string& prompt, const std::string& completion) {
  std::vector<int64_t> out = bytes(prompt + completion);
  out.push_back(kEot);
  return out;
}

CliRun score(const TempDir& dir, const std::string& data, const std::string& extra = "") {
  dir.write("score.jsonl", data);
  return run_cli(dir, "reward --score --checkpoint " + (dir / "rm.h5") + " --data " + (dir / "score.jsonl") + extra);
}

}  // namespace

TEST_CASE("ember reward --score: one JSON line per line, each the side's score at its last input position",
          "[cli][reward]") {
  TempDir dir("cli_reward_score");
  write_reward_checkpoint(dir / "rm.h5");
  const std::string long_completion(40, 'x');  // cut: 1 + 40 + 1 ids > T + 1 = 25
  const std::string data =
      R"({"prompt": [{"role": "user", "content": "q1"}], "chosen": [{"role": "assistant", "content": "yes"}],)"
      R"( "rejected": [{"role": "assistant", "content": "no"}]})"
      "\n\n"
      R"({"prompt": "ab", "completion": ")" + long_completion + "\"}\n" +
      R"({"prompt": [{"role": "user", "content": "q2"}], "completion": [{"role": "assistant", "content": "ok"}]})"
      "\n" R"({"prompt": "x", "completion": "y"})" "\n";
  for (const std::string batch : {"1", "2", "8"}) {
    SECTION("--batch-size " + batch) {
      const CliRun r = score(dir, data, " --batch-size " + batch);
      INFO(r.err);
      REQUIRE(r.code == 0);
      std::vector<json> out;
      for (size_t at = 0, end; (end = r.out.find('\n', at)) != std::string::npos; at = end + 1)
        out.push_back(json::parse(r.out.substr(at, end - at)));
      REQUIRE(out.size() == 4);
      const std::string rm = dir / "rm.h5";
      CHECK(out[0].at("line") == 1);
      CHECK(out[0].at("chosen").get<double>() == Approx(plain_score(rm, chat_side("q1", "yes"))).margin(2e-6));
      CHECK(out[0].at("rejected").get<double>() == Approx(plain_score(rm, chat_side("q1", "no"))).margin(2e-6));
      CHECK(out[1].at("line") == 3);  // the blank line 2 is counted, not printed
      CHECK(out[1].at("reward").get<double>() ==
            Approx(plain_score(rm, text_side("ab", long_completion))).margin(2e-6));
      CHECK(out[2].at("line") == 4);
      CHECK(out[2].at("reward").get<double>() == Approx(plain_score(rm, chat_side("q2", "ok"))).margin(2e-6));
      CHECK(out[3].at("line") == 5);
      CHECK(out[3].at("reward").get<double>() == Approx(plain_score(rm, text_side("x", "y"))).margin(2e-6));
      CHECK(out[0].size() == 3);
      CHECK(out[1].size() == 2);
    }
  }
}

TEST_CASE("ember reward --score: each bad input is one line naming the file, line and field",
          "[cli][reward]") {
  TempDir dir("cli_reward_score_errors");
  write_reward_checkpoint(dir / "rm.h5");
  const std::string ok = R"({"prompt": "a", "completion": "b"})";
  const std::string file = dir / "score.jsonl";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ok + "\n" + R"({"prompt": "a", "completion": 3})",
       file + " line 2: \"completion\": expected a string (got a number; \"prompt\" is a string)"},
      {"\n" + ok + "\n" + R"({"prompt": "a"})",
       file + " line 3: no \"completion\" and no \"chosen\" / \"rejected\""},
      {R"({"prompt": [{"role": "assistant", "content": "q"}], "chosen": [], "rejected": []})",
       file + " line 1: \"prompt\": its last message is the assistant's"},
      {ok + "\nnot json", file + " line 2: "},
      {"\n \n", file + ": no line to score"},
  };
  for (const auto& [data, message] : cases) {
    const CliRun r = score(dir, data);
    INFO(data << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("ember: error: " + message, 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  SECTION("--score with a training option, --checkpoint without --score") {
    dir.write("score.jsonl", ok + "\n");
    const std::string rm = dir / "rm.h5";
    const CliRun r = run_cli(dir, "reward --score --checkpoint " + rm + " --data " + file + " --steps 3");
    CHECK(r.code == 1);
    CHECK(r.err == "ember: error: --steps is an option of training; --score takes --checkpoint, "
                   "--data, --batch-size and --base\n");
    const CliRun t = run_cli(dir, "reward --checkpoint " + rm + " --data " + file + " --out " + (dir / "run"));
    CHECK(t.code == 1);
    CHECK(t.err == "ember: error: --checkpoint is --score's (scoring with a reward checkpoint); "
                   "training starts from --base\n");
    CHECK_FALSE(fs::exists(dir / "run"));
  }
  SECTION("a checkpoint that is not a reward model") {
    ember::testing::write_chat_base(dir / "base.h5");
    dir.write("score.jsonl", ok + "\n");
    const CliRun r = run_cli(dir, "reward --score --checkpoint " + (dir / "base.h5") + " --data " + file);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "ember: error: " + (dir / "base.h5") +
                       ": not a reward model (its config has no \"reward\"; ember reward writes one): "
                       "ember reward --score needs a reward checkpoint\n");
  }
}

TEST_CASE("generate, chat, loss, eval, evaluate and serve refuse a reward checkpoint in one line",
          "[cli][reward]") {
  TempDir dir("cli_reward_refusals");
  write_reward_checkpoint(dir / "rm.h5");
  dir.write("text.txt", "some text\n");
  const std::string rm = dir / "rm.h5";
  const std::vector<std::string> commands = {
      "generate --checkpoint " + rm + " --prompt hi --max-tokens 2",
      "chat --checkpoint " + rm,
      "loss --checkpoint " + rm + " --data " + (dir / "text.txt"),
      "eval --checkpoint " + rm + " --data " + (dir / "text.txt"),
      "evaluate --checkpoint " + rm + " --text " + (dir / "text.txt"),
      // an address of no interface here: without the check, serve would fail to listen, not hang
      "serve --checkpoint " + rm + " --host 203.0.113.1 --port 0",
  };
  for (const std::string& command : commands) {
    const CliRun r = run_cli(dir, command);
    INFO(command);
    CHECK(r.code == 1);
    CHECK(r.err == "ember: error: " + rm +
                       ": a reward model (it scores text; it does not generate): use ember reward --score\n");
  }
}
