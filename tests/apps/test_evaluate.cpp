// `ember evaluate`'s scoring (apps/evaluate): task-file errors name FILE:LINE;
// lm-evaluation-harness's context/continuation split (trailing spaces move to the
// continuation, an empty context gets <|endoftext|>) and left truncation; batched
// scores equal a per-sequence forward with a double log-softmax written here; acc,
// acc_norm and their standard errors on 4 items worked out by hand with a zeroed
// model (every token log(1/V)); the text mode's windows score each token once and
// its nats / bits per byte equal an independent per-token computation.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "apps/evaluate/loglikelihood.h"
#include "apps/evaluate/multiple_choice.h"
#include "apps/evaluate/perplexity.h"
#include "apps/evaluate/task_file.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "data/tokenizer/bpe_trainer.h"
#include "nn/config.h"

using namespace ember;
using namespace ember::apps;

namespace {

const data::Tokenizer kBytes = data::Tokenizer::bytes({"<|endoftext|>"});  // V = 257, eot 256

nn::ModelConfig tiny_config(int64_t max_seq_len) {
  return nn::ModelConfig::from_json(
      R"({"vocab_size": 257, "d_model": 16, "n_layers": 2, "n_heads": 2,
      "ffn_hidden": 32, "max_seq_len": )" +
      std::to_string(max_seq_len) + "}");
}

void zero_weights(nn::Transformer& model) {
  NoGradGuard no_grad;
  for (const Variable& p : model.parameters()) p.data().fill_(0.0);
}

std::vector<int64_t> ids_of(const std::string& text) {
  const std::vector<uint32_t> ids = kBytes.encode(text);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

// Sum of log softmax(logits of one forward over inputs)[target] at the given
// positions, in double, by a plain loop (independent of loglikelihood.cpp).
double reference_logprob(const nn::Transformer& model, const std::vector<int64_t>& inputs,
                         int64_t target) {
  NoGradGuard no_grad;
  const Tensor logits =
      model.forward(Tensor::from_vector(inputs, {1, static_cast<int64_t>(inputs.size())}))
          .logits.data();
  const int64_t t = inputs.size() - 1, V = logits.size(2);
  double m = -1e300, sum = 0;
  for (int64_t v = 0; v < V; ++v) m = std::max(m, logits.at({0, t, v}));
  for (int64_t v = 0; v < V; ++v) sum += std::exp(logits.at({0, t, v}) - m);
  return logits.at({0, t, target}) - m - std::log(sum);
}

std::string error_of(const std::string& text) {
  try {
    parse_tasks(text, "t.jsonl");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("evaluate: task file: items, blank lines, and one error line naming FILE:LINE",
          "[evaluate]") {
  const std::vector<ChoiceItem> items = parse_tasks(
      "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 1}\n\n"
      "{\"id\": 7, \"context\": \"\", \"choices\": [\"x\", \"y\", \"z\"], \"gold\": 0}\n",
      "t.jsonl");
  REQUIRE(items.size() == 2);
  CHECK(items[0].gold == 1);
  CHECK(items[1].line == 3);
  CHECK(items[1].choices.size() == 3);
  const std::string good = "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 0}\n";
  CHECK(error_of(good + "{oops\n").rfind("t.jsonl:2: not a JSON object (parse error", 0) == 0);
  CHECK(error_of(good + "[1, 2]\n") == "t.jsonl:2: not a JSON object but array");
  CHECK(error_of("{\"context\": \"a\", \"gold\": 0}") == "t.jsonl:1: missing key \"choices\"");
  CHECK(error_of("{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 2}") ==
        "t.jsonl:1: \"gold\" 2 is out of range for 2 choices (0 to 1)");
  CHECK(error_of("{\"context\": \"a\", \"choices\": [\"b\"], \"gold\": 0}") ==
        "t.jsonl:1: \"choices\" needs at least 2 entries, got 1");
  CHECK(error_of("{\"context\": 3, \"choices\": [\"b\", \"c\"], \"gold\": 0}") ==
        "t.jsonl:1: \"context\" must be a string, got number");
  CHECK(error_of("{\"context\": \"a\", \"choices\": [\"b\", 4], \"gold\": 0}") ==
        "t.jsonl:1: choice 1 must be a string, got number");
  CHECK(error_of("{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": \"0\"}") ==
        "t.jsonl:1: \"gold\" must be an integer, got \"0\"");
  CHECK(error_of("{\"context\": \"a\", \"choices\": [\"b\", \"\"], \"gold\": 0}") ==
        "t.jsonl:1: choice 1 is empty (acc_norm divides by its length)");
  CHECK(error_of("\n\n") ==
        "t.jsonl: no items (one JSON object per line: {\"context\": ..., \"choices\": [...], "
        "\"gold\": i})");
}

TEST_CASE(
    "evaluate: split: trailing white space moves to the continuation, an empty context gets "
    "<|endoftext|>",
    "[evaluate]") {
  SplitPair p = split_pair(kBytes, "The cat  ", "sat");
  CHECK(p.context == ids_of("The cat"));
  CHECK(p.continuation == ids_of("  sat"));
  p = split_pair(kBytes, "", "sat");
  CHECK(p.context == std::vector<int64_t>{256});
  CHECK(p.continuation == ids_of("sat"));
  p = split_pair(data::Tokenizer(), " ", "sat");  // no <|endoftext|>: a newline's tokens
  CHECK(p.context == std::vector<int64_t>{'\n'});
  CHECK(p.continuation == ids_of(" sat"));
}

TEST_CASE("evaluate: split with BPE: the moved space is scored inside the choice's first token",
          "[evaluate]") {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "the cat sat on the mat. ";
  const data::Tokenizer bpe = data::train_bpe_on_text(text, {.vocab_size = 280});
  auto enc = [&](const std::string& t) {
    const std::vector<uint32_t> ids = bpe.encode(t);
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  const SplitPair p = split_pair(bpe, "the cat ", "sat");
  CHECK(p.context == enc("the cat"));
  CHECK(p.continuation == enc(" sat"));
  CHECK(enc(" sat").size() ==
        1);  // " sat" is one token; "the cat " + "sat" encoded apart would not be
  CHECK(enc("the cat ").size() + enc("sat").size() > enc("the cat sat").size());
}

TEST_CASE("evaluate: a context + continuation longer than the model's context is cut from the left",
          "[evaluate]") {
  const SplitPair p{ids_of("0123456789"), ids_of("abc")};
  const ScoredSequence s = scored_pair(p, 8);
  CHECK(s.tokens == ids_of("456789abc"));  // max_len + 1 tokens: 8 inputs
  CHECK(s.targets == 3);
  CHECK_THROWS_WITH(scored_pair({ids_of("x"), ids_of("abcdefghi")}, 8),
                    "a choice of 9 tokens is longer than the model's context (8 tokens)");
}

TEST_CASE("evaluate: batched scores equal one forward per sequence with a double log-softmax",
          "[evaluate]") {
  nn::Transformer model(tiny_config(12), 7);
  const std::vector<ScoredSequence> seqs = {
      {ids_of("hello"), 2}, {ids_of("a longer one!"), 5}, {ids_of("ab"), 1}, {ids_of("xyz"), 0}};
  const std::vector<double> got = score_sequences(model, seqs, 3);  // a padded batch of 3, then 1
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::vector<int64_t>& t = seqs[i].tokens;
    double expected = 0;
    for (size_t j = t.size() - seqs[i].targets; j < t.size(); ++j) {
      expected += reference_logprob(model, std::vector<int64_t>(t.begin(), t.begin() + j), t[j]);
    }
    CHECK(got[i] == Approx(expected).epsilon(1e-5).margin(1e-5));
  }
  CHECK(got[3] == 0.0);
  CHECK(model.is_training());  // the mode is restored
}

TEST_CASE(
    "evaluate: acc, acc_norm and standard errors on four items by hand (zeroed model: log 1/V per "
    "token)",
    "[evaluate]") {
  nn::Transformer model(tiny_config(16), 1);
  zero_weights(model);
  // Scores in units of log(1/257) per byte token; acc_norm divides by code points.
  //   1: "ab" 2, "abc" 3           -> acc 0 (gold 0)     norm 1, 1 tie -> 0 (gold)
  //   2: "é" 2 (1 char), "ab" 2    -> tie -> 0 (gold 1)  norm 2 vs 1 -> 1 (gold)
  //   3: "Q: " + "xyz" -> " xyz" 4, " xy" 3 -> 1 (gold 0); norm 4/3 vs 3/2 -> 0 (gold)
  //   4: "" -> <|endoftext|>; "aaaa" 4, "b" 1 -> 1 (gold); norm 1, 1 tie -> 0
  const std::vector<ChoiceItem> items = parse_tasks(
      "{\"context\": \"Q:\", \"choices\": [\"ab\", \"abc\"], \"gold\": 0}\n"
      "{\"context\": \"Q:\", \"choices\": [\"\u00e9\", \"ab\"], \"gold\": 1}\n"
      "{\"context\": \"Q: \", \"choices\": [\"xyz\", \"xy\"], \"gold\": 0}\n"
      "{\"context\": \"\", \"choices\": [\"aaaa\", \"b\"], \"gold\": 1}\n",
      "hand.jsonl");
  const std::vector<double> s = score_sequences(model, choice_sequences(kBytes, items[2], 16), 4);
  CHECK(s[0] == Approx(-4 * std::log(257.0)).epsilon(1e-6));
  CHECK(s[1] == Approx(-3 * std::log(257.0)).epsilon(1e-6));
  std::vector<int64_t> seen;
  const ChoiceMetrics m =
      evaluate_choices(model, kBytes, items, 3, "hand.jsonl",
                       [&](int64_t done, int64_t, double) { seen.push_back(done); });
  CHECK(m.n == 4);
  CHECK(m.acc == 0.5);
  CHECK(m.acc_norm == 0.75);
  CHECK(m.acc_stderr == Approx(std::sqrt(0.25 / 3)));
  CHECK(m.acc_norm_stderr == Approx(0.25));
  CHECK(seen == std::vector<int64_t>{2, 4});  // groups of >= 3 sequences
  CHECK(std::isnan(share_stderr(1.0, 1)));
}

TEST_CASE("evaluate: a choice too long for the model is an error naming the item's line",
          "[evaluate]") {
  nn::Transformer model(tiny_config(4), 1);
  const std::vector<ChoiceItem> items = parse_tasks(
      "\n{\"context\": \"Q\", \"choices\": [\"a\", \"abcdefg\"], \"gold\": 0}\n", "long.jsonl");
  CHECK_THROWS_WITH(
      evaluate_choices(model, kBytes, items, 2, "long.jsonl"),
      "long.jsonl:2: a choice of 7 tokens is longer than the model's context (4 tokens)");
}

TEST_CASE(
    "evaluate: text windows score every token once with the longest context the stride allows",
    "[evaluate]") {
  std::vector<int64_t> ids(30);
  for (int64_t i = 0; i < 30; ++i) ids[i] = i;
  for (const int64_t stride : {1, 3, 8}) {
    std::vector<int> scored(30, 0);
    for (const ScoredSequence& w : rolling_windows(ids, 1, 8, stride)) {
      REQUIRE(w.tokens.size() <= 9);
      const int64_t n = w.tokens.size();
      for (int64_t j = n - w.targets; j < n; ++j) {
        ++scored[w.tokens[j]];
        CHECK(j >= std::min<int64_t>(w.tokens[j], 8 - stride + 1));  // context before the target
      }
    }
    CHECK(scored[0] == 0);
    for (int64_t i = 1; i < 30; ++i) CHECK(scored[i] == 1);
  }
}

TEST_CASE("evaluate: text: nats and bits per byte equal a per-token computation", "[evaluate]") {
  nn::Transformer model(tiny_config(8), 3);
  const std::string text = "Fortune favours the bold, they say.\n";  // 36 bytes
  std::vector<int64_t> all = {256};
  for (const int64_t t : ids_of(text)) all.push_back(t);
  const int64_t T = 8, n = all.size();
  for (const int64_t stride : {1, 3, 8}) {
    double nats = 0;
    for (int64_t i = 1; i < n; ++i) {  // target i: inputs from its window's start (perplexity.h)
      const int64_t hi =
          i <= T ? std::min(n, T + 1) : std::min(n, T + 1 + stride * ((i - T - 1) / stride + 1));
      const int64_t start = std::max<int64_t>(0, hi - 1 - T);
      nats -= reference_logprob(model, std::vector<int64_t>(all.begin() + start, all.begin() + i),
                                all[i]);
    }
    const TextMetrics m = evaluate_text(model, kBytes, text, T, stride, 2);
    CHECK(m.tokens == 36);
    CHECK(m.bytes == 36);
    CHECK(m.nats == Approx(nats).epsilon(1e-5));
    CHECK(m.bits_per_byte == Approx(nats / std::log(2.0) / 36).epsilon(1e-5));
    CHECK(m.perplexity == Approx(std::exp(nats / 36)).epsilon(1e-5));
  }
  zero_weights(model);
  CHECK(evaluate_text(model, kBytes, "é!", 8, 8, 2).bits_per_byte ==
        Approx(std::log2(257.0)));  // 3 tokens, 3 bytes
  CHECK_THROWS_WITH(evaluate_text(model, kBytes, "x", 9, 0, 2),
                    "--seq-len must be 1 to the model's max_seq_len 8, got 9");
  CHECK_THROWS_WITH(evaluate_text(model, kBytes, "x", 4, 5, 2),
                    "--stride must be 1 to --seq-len (4), got 5");
}
