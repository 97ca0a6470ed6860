// `ember evaluate`: multiple-choice accuracy of a checkpoint on a task file
// (--tasks, docs/cli.md#evaluating: acc and acc_norm with standard errors, as
// lm-evaluation-harness scores them) or perplexity and bits per byte of a text
// file (--text). A table on stdout, or one JSON object with --json; progress
// on stderr every few seconds.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/cli/commands.h"
#include "apps/cli/moved_base_option.h"
#include "apps/evaluate/multiple_choice.h"
#include "apps/evaluate/perplexity.h"
#include "apps/evaluate/task_file.h"
#include "apps/common/model_io.h"
#include "core/io/read_file.h"

namespace ember::apps {
namespace {

struct EvaluateOptions {
  std::string checkpoint, tasks, text, tokenizer, base;
  std::string weights;  // --weights: score on the serving forward in this type; "": the training forward
  int64_t limit = 0, batch_size = 4, seq_len = 0, stride = 0;
  bool json = false;
};

// A line on stderr at most every 2 seconds (none for a quick run).
class ProgressLine {
 public:
  bool due() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(2)) return false;
    last_ = now;
    return true;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// A standard error for the table ("n/a" with one item).
std::string stderr_text(double se) {
  if (std::isnan(se)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", se);
  return buf;
}

// The serving forward's model in --weights, or none (the training forward) when it is not given.
std::unique_ptr<const inference::InferenceModel> inference_model(const LoadedModel& lm,
                                                                 const std::string& weights) {
  if (weights.empty()) return nullptr;
  return std::make_unique<const inference::InferenceModel>(*lm.model, kernels::weight_type_named(weights));
}

int run_tasks(const EvaluateOptions& o) {
  std::vector<ChoiceItem> items = read_tasks(o.tasks);
  if (o.limit > 0 && static_cast<int64_t>(items.size()) > o.limit) items.resize(o.limit);
  LoadedModel lm = load_model_for_text(o.checkpoint, o.tokenizer, o.base);
  const auto im = inference_model(lm, o.weights);
  ProgressLine line;
  const ChoiceMetrics m = evaluate_choices(
      *lm.model, lm.tokenizer, items, o.batch_size, o.tasks,
      [&](int64_t done, int64_t total, double acc) {
        if (done < total && line.due()) {
          std::fprintf(stderr, "evaluate: %lld/%lld items, acc %.4f\n",
                       static_cast<long long>(done), static_cast<long long>(total), acc);
        }
      },
      im.get());
  if (o.json) {
    const nlohmann::json j = {{"tasks", o.tasks},       {"n", m.n},
                              {"acc", m.acc},           {"acc_stderr", m.acc_stderr},
                              {"acc_norm", m.acc_norm}, {"acc_norm_stderr", m.acc_norm_stderr}};
    std::printf("%s\n", j.dump().c_str());  // NaN (one item) is null
    return 0;
  }
  double chance = 0;
  for (const ChoiceItem& item : items) chance += 1.0 / item.choices.size();
  std::printf("tasks %s: %lld items (chance %.4f)\n", o.tasks.c_str(), static_cast<long long>(m.n),
              chance / items.size());
  std::printf("%-9s %8s %8s\n", "metric", "value", "stderr");
  std::printf("%-9s %8.4f %8s\n", "acc", m.acc, stderr_text(m.acc_stderr).c_str());
  std::printf("%-9s %8.4f %8s\n", "acc_norm", m.acc_norm, stderr_text(m.acc_norm_stderr).c_str());
  return 0;
}

int run_text(const EvaluateOptions& o) {
  const std::string text = read_file(o.text, "text file", kMaxTextFileBytes);
  LoadedModel lm = load_model_for_text(o.checkpoint, o.tokenizer, o.base);
  const auto im = inference_model(lm, o.weights);
  ProgressLine line;
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : lm.model->config().max_seq_len;
  const int64_t stride = o.stride > 0 ? o.stride : seq_len;
  const TextMetrics m =
      evaluate_text(*lm.model, lm.tokenizer, text, seq_len, stride, o.batch_size,
                    [&](int64_t done, int64_t total) {
                      if (done < total && line.due()) {
                        std::fprintf(stderr, "evaluate: %lld/%lld windows\n",
                                     static_cast<long long>(done), static_cast<long long>(total));
                      }
                    },
                    im.get());
  if (o.json) {
    const nlohmann::json j = {{"text", o.text},
                              {"tokens", m.tokens},
                              {"bytes", m.bytes},
                              {"windows", m.windows},
                              {"seq_len", seq_len},
                              {"stride", stride},
                              {"weights", o.weights.empty() ? "float32" : o.weights},
                              {"nats_per_token", m.nats_per_token},
                              {"perplexity", m.perplexity},
                              {"bits_per_byte", m.bits_per_byte}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("text %s: %lld bytes, %lld windows of %lld tokens, stride %lld\n", o.text.c_str(),
              static_cast<long long>(m.bytes), static_cast<long long>(m.windows),
              static_cast<long long>(seq_len), static_cast<long long>(stride));
  std::printf("%-12s %lld\n", "tokens", static_cast<long long>(m.tokens));
  std::printf("%-12s %.6f\n", "nats/token", m.nats_per_token);
  std::printf("%-12s %.4f\n", "perplexity", m.perplexity);
  std::printf("%-12s %.6f\n", "bits/byte", m.bits_per_byte);
  return 0;
}

}  // namespace

CommandRunner add_evaluate_command(CLI::App& app) {
  auto o = std::make_shared<EvaluateOptions>();
  CLI::App* sub = app.add_subcommand(
      "evaluate",
      "Multiple-choice accuracy (lm-evaluation-harness scoring) or perplexity of a checkpoint");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5): base, fine-tune or merged")
      ->required()
      ->check(CLI::ExistingFile);
  add_moved_base_option(*sub, o->base);
  auto* tasks =
      sub->add_option(
             "--tasks", o->tasks,
             "multiple-choice items, one JSON per line: {\"context\", \"choices\", \"gold\"}")
          ->check(CLI::ExistingFile);
  auto* text = sub->add_option("--text", o->text, "a UTF-8 text file: perplexity and bits per byte")
                   ->check(CLI::ExistingFile)
                   ->excludes(tasks);
  tasks->excludes(text);
  sub->add_option("--limit", o->limit, "with --tasks: only the first N items (0: all)")
      ->needs(tasks);
  sub->add_option("--batch-size", o->batch_size, "sequences per forward pass")
      ->capture_default_str();
  sub->add_option("--seq-len", o->seq_len,
                  "with --text: tokens per window (0: the model's max_seq_len)")
      ->needs(text);
  sub->add_option("--stride", o->stride, "with --text: tokens a window advances by (0: --seq-len)")
      ->needs(text);
  sub->add_flag("--json", o->json, "print one JSON object instead of a table");
  sub->add_option("--weights", o->weights,
                  "score on the serving forward with its weights in this type, converted once at "
                  "load: float32, bf16 or int8 (default: the training forward, float32)")
      ->check(CLI::IsMember({"float32", "bf16", "int8"}));
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json to use instead of the checkpoint's")
      ->check(CLI::ExistingFile);
  return [o]() {
    EMBER_CHECK(!o->tasks.empty() || !o->text.empty(), "give --tasks FILE.jsonl or --text FILE");
    EMBER_CHECK(o->batch_size > 0, "--batch-size must be positive, got ", o->batch_size);
    EMBER_CHECK(o->limit >= 0, "--limit must be positive (or 0: all items), got ", o->limit);
    EMBER_CHECK(o->seq_len >= 0 && o->stride >= 0,
                "--seq-len and --stride must be positive (or 0: the default)");
    return o->tasks.empty() ? run_text(*o) : run_tasks(*o);
  };
}

}  // namespace ember::apps
