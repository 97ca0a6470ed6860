// The alignment math of docs/model.md#preference-optimisation-and-reward-models: sequence
// log-probabilities against a plain loop, every pair loss and metric against hand-computed
// values (dpo's log 2 at h = 0 and label smoothing, ipo's target, simpo's gamma, orpo's
// log-odds near log-probabilities of 0 against long double), the options' checks, float64
// gradchecks, the normaliser (two halves sum to the whole), and the reward model (score head
// at the last token, Bradley-Terry with margin and centring, Transformer::hidden_states).
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/alignment/preference_loss.h"
#include "nn/alignment/reward_model.h"
#include "nn/alignment/sequence_logprobs.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;

namespace {

Tensor f64(const std::vector<double>& v) { return Tensor::from_vector<double>(v); }
Variable leaf(const std::vector<double>& v) { return Variable(f64(v), true); }

// log sigmoid(x) written as -log(1 + e^-x) (moderate x only).
double log_sig(double x) { return -std::log1p(std::exp(-x)); }

std::map<std::string, double> as_map(const std::vector<std::pair<std::string, double>>& v) {
  return {v.begin(), v.end()};
}

// Three pairs with distinct values; n_c, n_r >= 1.
PairLogprobs three_pairs() {
  PairLogprobs p;
  p.logp_c = leaf({-3.0, -5.5, -2.0});
  p.logp_r = leaf({-5.0, -4.0, -6.5});
  p.n_c = f64({2, 5, 1});
  p.n_r = f64({4, 3, 6});
  p.ref_c = f64({-4.0, -5.0, -2.5});
  p.ref_r = f64({-4.5, -4.5, -6.0});
  return p;
}

std::vector<double> values(const Variable& v) { return v.data().to_vector<double>(); }

}  // namespace

TEST_CASE("sequence_logprobs sums the scored positions of each row", "[alignment]") {
  constexpr int64_t B = 2, T = 4, V = 5;
  Variable logits(Tensor::randn({B, T, V}, 70, 0, DType::Float64), true);
  // Row 0 scores t = 1, 2; row 1 scores t = 0, 1, 3. Unscored targets hold ids out of range.
  const Tensor targets = Tensor::from_vector<int64_t>({-1, 3, 0, 99, 2, 4, -7, 1}, {B, T});
  const Tensor scored = Tensor::from_vector<float>({0, 1, 1, 0, 1, 1, 0, 1}, {B, T});
  const SequenceLogprobs s = sequence_logprobs(logits, targets, scored);
  REQUIRE(s.logp.shape() == Shape({B}));
  CHECK(s.n.to_vector<double>() == std::vector<double>{2, 3});
  const auto ys = targets.to_vector<int64_t>();
  const auto ws = scored.to_vector<float>();
  for (int64_t b = 0; b < B; ++b) {
    double want = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (ws[b * T + t] == 0) continue;
      double lse = 0;
      for (int64_t i = 0; i < V; ++i) lse += std::exp(logits.data().at({b, t, i}));
      want += logits.data().at({b, t, ys[b * T + t]}) - std::log(lse);
    }
    CHECK(s.logp.data().at({b}) == Approx(want).epsilon(1e-13));
  }
  const Variable g(f64({0.7, -1.3}));
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Variable>& v) {
        return sum(sequence_logprobs(v[0], targets, scored).logp * g);
      },
      {logits});
  INFO(r.message);
  CHECK(r.ok);
  const Tensor two = Tensor::from_vector<float>({0, 1, 2, 0, 1, 1, 0, 1}, {B, T});
  CHECK_THROWS_WITH(sequence_logprobs(logits, targets, two), Catch::Contains("expected 0 or 1"));
  CHECK_THROWS_WITH(sequence_logprobs(logits, targets, scored.reshape({T, B})),
                    Catch::Contains("[B, T]"));
}

TEST_CASE("preference options: defaults per loss and one-line errors", "[alignment]") {
  CHECK(parse_preference_loss("dpo") == PreferenceLossKind::Dpo);
  CHECK(parse_preference_loss("orpo") == PreferenceLossKind::Orpo);
  CHECK_THROWS_WITH(parse_preference_loss("kto"),
                    Catch::StartsWith("--loss") && Catch::Contains("\"kto\""));
  for (const char* name : {"dpo", "ipo", "simpo", "orpo"}) {
    const PreferenceOptions o = preference_defaults(parse_preference_loss(name));
    CHECK(std::string(preference_loss_name(o.loss)) == name);
    CHECK(o.beta == (std::string(name) == "simpo" ? 2.0 : 0.1));
    CHECK(o.label_smoothing == 0);
    CHECK(o.simpo_gamma == 0.5);
    CHECK(o.sft_weight == 0);
    CHECK_NOTHROW(check_preference_options(o));
  }
  PreferenceOptions o = preference_defaults(PreferenceLossKind::Dpo);
  for (double beta : {0.0, -0.1, std::nan("")}) {
    o.beta = beta;
    CHECK_THROWS_WITH(check_preference_options(o), Catch::StartsWith("--beta must be > 0"));
  }
  o.beta = 0.1;
  for (double e : {-0.01, 0.5, 0.7}) {
    o.label_smoothing = e;
    CHECK_THROWS_WITH(check_preference_options(o), Catch::StartsWith("--label-smoothing"));
  }
  o.label_smoothing = 0.49;
  CHECK_NOTHROW(check_preference_options(o));
  o.sft_weight = -1;
  CHECK_THROWS_WITH(check_preference_options(o), Catch::StartsWith("--sft-weight"));
}

TEST_CASE("dpo: log 2 at h = 0, label smoothing, rewards and accuracy by hand", "[alignment]") {
  PairLogprobs p;
  p.logp_c = leaf({-3.0, -7.0, -2.0});
  p.logp_r = leaf({-4.0, -6.0, -3.0});
  p.n_c = f64({1, 1, 1});
  p.n_r = f64({1, 1, 1});
  p.ref_c = p.logp_c.data();
  p.ref_r = p.logp_r.data();
  for (double v : values(dpo_loss(p, 0.1, 0))) CHECK(v == Approx(std::log(2.0)).epsilon(1e-15));
  for (double v : values(dpo_loss(p, 3.0, 0.3))) CHECK(v == Approx(std::log(2.0)).epsilon(1e-15));
  // logp - ref: chosen +1, +0.5, -1; rejected +0.5, -1, -1: h = 0.5, 1.5, 0.
  p.ref_c = f64({-4.0, -7.5, -1.0});
  p.ref_r = f64({-4.5, -5.0, -2.0});
  const double h[3] = {0.5, 1.5, 0.0};
  for (double e : {0.0, 0.2}) {
    const auto got = values(dpo_loss(p, 0.5, e));
    for (int i = 0; i < 3; ++i) {
      INFO("pair " << i << " label smoothing " << e);
      const double want = -(1 - e) * log_sig(0.5 * h[i]) - e * log_sig(-0.5 * h[i]);
      CHECK(got[i] == Approx(want).epsilon(1e-14));
    }
  }
  PreferenceOptions o = preference_defaults(PreferenceLossKind::Dpo);
  o.beta = 0.5;
  o.label_smoothing = 0.2;
  const PreferenceLossResult r = preference_loss(o, p, 4.0);
  double total = 0;
  for (double hi : h) total += -0.8 * log_sig(0.5 * hi) - 0.2 * log_sig(-0.5 * hi);
  CHECK(r.loss.item() == Approx(total / 4).epsilon(1e-14));
  // Rewards beta (logp - ref): chosen 0.5, 0.25, -0.5; rejected 0.25, -0.5, -0.5 (a tie).
  CHECK(r.sums.pairs == 3);
  CHECK(r.sums.loss == Approx(total).epsilon(1e-14));
  CHECK(r.sums.chosen == Approx(0.25).epsilon(1e-14));
  CHECK(r.sums.rejected == Approx(-0.75).epsilon(1e-14));
  CHECK(r.sums.correct == 2);  // the tie is not counted
  const auto m = as_map(r.sums.means());
  CHECK(m.at("loss") == Approx(total / 3).epsilon(1e-14));
  CHECK(m.at("rewards/chosen") == Approx(0.25 / 3).epsilon(1e-14));
  CHECK(m.at("rewards/rejected") == Approx(-0.25).epsilon(1e-14));
  CHECK(m.at("rewards/margins") == Approx(1.0 / 3).epsilon(1e-14));
  CHECK(m.at("rewards/accuracy") == Approx(2.0 / 3).epsilon(1e-15));
  // Metrics of micro-batches add up: twice the same sums give the same means.
  PreferenceMetrics twice = r.sums;
  twice += r.sums;
  CHECK(twice.pairs == 6);
  CHECK(as_map(twice.means()).at("rewards/accuracy") == Approx(2.0 / 3).epsilon(1e-15));
  // dpo and ipo need the reference.
  p.ref_c = Tensor();
  CHECK_THROWS_WITH(preference_loss(o, p, 3), Catch::Contains("ref_c"));
}

TEST_CASE("ipo: zero at its target 1 / (2 beta), per-token means by hand", "[alignment]") {
  PairLogprobs p = three_pairs();
  // beta 0.25: target 2. Pair 0: (1 / 2) - (-0.5 / 4) = 0.625; pair 1: (-0.5 / 5) - (0.5 / 3);
  // pair 2: (0.5 / 1) - (-0.5 / 6).
  const double hp[3] = {0.5 + 0.125, -0.1 - 0.5 / 3, 0.5 + 0.5 / 6};
  const auto got = values(ipo_loss(p, 0.25));
  for (int i = 0; i < 3; ++i) CHECK(got[i] == Approx((hp[i] - 2) * (hp[i] - 2)).epsilon(1e-14));
  // A pair exactly at the target: (logp_c - ref_c) / n_c = 4 / 2, the rejected side at its ref.
  PairLogprobs at;
  at.logp_c = leaf({-1.0});
  at.ref_c = f64({-5.0});
  at.n_c = f64({2});
  at.logp_r = leaf({-3.0});
  at.ref_r = f64({-3.0});
  at.n_r = f64({7});
  CHECK(values(ipo_loss(at, 0.25))[0] == 0.0);
  CHECK(values(ipo_loss(at, 0.5))[0] == Approx(1.0).epsilon(1e-15));  // target 1: (2 - 1)^2
  // Its metrics are the summed rewards beta (logp - ref), like dpo's.
  PreferenceOptions o = preference_defaults(PreferenceLossKind::Ipo);
  const PreferenceLossResult r = preference_loss(o, p, 3);
  CHECK(r.sums.chosen == Approx(0.1 * (1 - 0.5 + 0.5)).epsilon(1e-14));
  CHECK(r.sums.rejected == Approx(0.1 * (-0.5 + 0.5 - 0.5)).epsilon(1e-14));
  double total = 0;
  for (double v : hp) total += (v - 5) * (v - 5);  // beta 0.1: target 5
  CHECK(r.loss.item() == Approx(total / 3).epsilon(1e-14));
}

TEST_CASE("simpo: log 2 where beta (l_c - l_r) = gamma, no reference", "[alignment]") {
  PairLogprobs p;
  p.logp_c = leaf({-1.5, -4.0});  // l_c = -0.75, -1
  p.n_c = f64({2, 4});
  p.logp_r = leaf({-3.0, -1.0});  // l_r = -1, -0.5
  p.n_r = f64({3, 2});
  PreferenceOptions o = preference_defaults(PreferenceLossKind::Simpo);  // beta 2, gamma 0.5
  const auto got = values(simpo_loss(p, o.beta, o.simpo_gamma));
  CHECK(got[0] == Approx(std::log(2.0)).epsilon(1e-15));  // 2 (0.25) - 0.5 = 0
  CHECK(got[1] == Approx(-log_sig(2 * -0.5 - 0.5)).epsilon(1e-14));
  CHECK(values(simpo_loss(p, 2, 0))[0] == Approx(-log_sig(0.5)).epsilon(1e-14));
  const PreferenceLossResult r = preference_loss(o, p, 2);
  CHECK(r.loss.item() == Approx((std::log(2.0) - log_sig(-1.5)) / 2).epsilon(1e-14));
  // Rewards beta l: chosen -1.5, -2; rejected -2, -1.
  CHECK(r.sums.chosen == Approx(-3.5).epsilon(1e-15));
  CHECK(r.sums.rejected == Approx(-3.0).epsilon(1e-15));
  CHECK(r.sums.correct == 1);
}

TEST_CASE("orpo: log-odds near log-probabilities of 0 stay finite and exact", "[alignment]") {
  // l_c, l_r = logp / n, down to -1e-18 where 1 - exp(l) is 0 in double.
  const std::vector<std::pair<double, double>> cases = {
      {-1e-6, -2e-6}, {-1e-18, -3e-18}, {-0.25, -1.5}, {-3.0, -1e-9}};
  for (auto [lc, lr] : cases) {
    PairLogprobs p;
    p.logp_c = leaf({2 * lc});
    p.n_c = f64({2});
    p.logp_r = leaf({lr});
    p.n_r = f64({1});
    const long double c = lc, r = lr;
    const long double log_odds =
        (c - r) - (std::log(-std::expm1(c)) - std::log(-std::expm1(r)));
    const long double want = -c + 0.1L * std::log1p(std::exp(-log_odds));
    const Variable loss = orpo_loss(p, 0.1);
    INFO("l_c " << lc << " l_r " << lr);
    CHECK(std::isfinite(loss.item()));
    CHECK(loss.item() == Approx(static_cast<double>(want)).epsilon(1e-13));
    sum(loss).backward();
    CHECK(std::isfinite(p.logp_c.grad().item()));
    CHECK(std::isfinite(p.logp_r.grad().item()));
  }
  // Rewards beta l.
  PreferenceOptions o = preference_defaults(PreferenceLossKind::Orpo);
  PairLogprobs p = three_pairs();
  const PreferenceLossResult r = preference_loss(o, p, 3);
  CHECK(r.sums.chosen == Approx(0.1 * (-1.5 - 1.1 - 2.0)).epsilon(1e-14));
  CHECK(r.sums.rejected == Approx(0.1 * (-1.25 - 4.0 / 3 - 6.5 / 6)).epsilon(1e-14));
  CHECK(r.sums.correct == 1);
}

TEST_CASE("the sft term adds sft_weight (-l_c) to every loss", "[alignment]") {
  for (const char* name : {"dpo", "ipo", "simpo", "orpo"}) {
    PreferenceOptions o = preference_defaults(parse_preference_loss(name));
    const PairLogprobs p = three_pairs();
    const double plain = preference_loss(o, p, 5).loss.item();
    o.sft_weight = 0.7;
    const PreferenceLossResult r = preference_loss(o, p, 5);
    const double sft = 0.7 * (1.5 + 1.1 + 2.0);  // -l_c = 3 / 2, 5.5 / 5, 2 / 1
    INFO(name);
    CHECK(r.loss.item() == Approx(plain + sft / 5).epsilon(1e-13));
    CHECK(r.sums.loss == Approx(plain * 5 + sft).epsilon(1e-13));
  }
}

TEST_CASE("every pair loss passes float64 gradcheck", "[alignment][gradcheck]") {
  for (const char* name : {"dpo", "ipo", "simpo", "orpo"}) {
    PreferenceOptions o = preference_defaults(parse_preference_loss(name));
    o.label_smoothing = 0.1;
    o.sft_weight = 0.3;
    PairLogprobs p = three_pairs();
    const GradcheckResult r = gradcheck(
        [&](const std::vector<Variable>& v) {
          PairLogprobs q = p;
          q.logp_c = v[0];
          q.logp_r = v[1];
          return preference_loss(o, q, 2.5).loss;
        },
        {p.logp_c, p.logp_r});
    INFO(name << ": " << r.message);
    CHECK(r.ok);
  }
}

TEST_CASE("pair losses: two halves over the step's pair count sum to the whole", "[alignment]") {
  for (const char* name : {"dpo", "ipo", "simpo", "orpo"}) {
    const PreferenceOptions o = preference_defaults(parse_preference_loss(name));
    const std::vector<double> lc = {-3, -5.5, -2, -4}, lr = {-5, -4, -6.5, -1}, nc = {2, 5, 1, 3},
                              nr = {4, 3, 6, 1}, rc = {-4, -5, -2.5, -3}, rr = {-4.5, -4.5, -6, -2};
    const auto part = [&](size_t from, size_t count) {
      const auto cut = [&](const std::vector<double>& v) {
        return std::vector<double>(v.begin() + from, v.begin() + from + count);
      };
      PairLogprobs p;
      p.logp_c = leaf(cut(lc));
      p.logp_r = leaf(cut(lr));
      p.n_c = f64(cut(nc));
      p.n_r = f64(cut(nr));
      p.ref_c = f64(cut(rc));
      p.ref_r = f64(cut(rr));
      const PreferenceLossResult r = preference_loss(o, p, 4);
      r.loss.backward();
      std::vector<double> g = p.logp_c.grad().to_vector<double>();
      for (double v : p.logp_r.grad().to_vector<double>()) g.push_back(v);
      return std::make_pair(r, g);
    };
    const auto [whole, gw] = part(0, 4);
    const auto [a, ga] = part(0, 2);
    const auto [b, gb] = part(2, 2);
    INFO(name);
    CHECK(a.loss.item() + b.loss.item() == Approx(whole.loss.item()).epsilon(1e-14));
    PreferenceMetrics sums = a.sums;
    sums += b.sums;
    const auto ms = as_map(sums.means()), mw = as_map(whole.sums.means());
    for (const auto& [key, v] : mw) CHECK(ms.at(key) == Approx(v).epsilon(1e-14));
    // gw: chosen 0..3 then rejected 0..3; ga / gb: chosen 0..1 then rejected 0..1.
    for (int i = 0; i < 2; ++i) {
      CHECK(ga[i] == gw[i]);
      CHECK(gb[i] == gw[2 + i]);
      CHECK(ga[2 + i] == gw[4 + i]);
      CHECK(gb[2 + i] == gw[6 + i]);
    }
  }
}

TEST_CASE("reward_loss: Bradley-Terry with margin and centring by hand", "[alignment][reward]") {
  const Variable rc = leaf({1.0, -0.5, 0.3}), rr = leaf({0.5, 0.25, 0.3});
  const Tensor m = f64({0.25, 0.0, -1.0});
  const RewardLossResult r = reward_loss(rc, rr, m, 0.1, 6);
  const double per[3] = {-log_sig(0.25) + 0.1 * 1.5 * 1.5, -log_sig(-0.75) + 0.1 * 0.25 * 0.25,
                         -log_sig(1.0) + 0.1 * 0.6 * 0.6};
  CHECK(r.loss.item() == Approx((per[0] + per[1] + per[2]) / 6).epsilon(1e-14));
  CHECK(r.sums.loss == Approx(per[0] + per[1] + per[2]).epsilon(1e-14));
  CHECK(r.sums.pairs == 3);
  CHECK(r.sums.correct == 1);  // pair 2 is a tie
  CHECK(r.sums.margin == Approx(0.5 - 0.75 + 0.0).epsilon(1e-14));
  const auto means = as_map(r.sums.means());
  CHECK(means.at("accuracy") == Approx(1.0 / 3).epsilon(1e-15));
  CHECK(means.at("margin") == Approx(-0.25 / 3).epsilon(1e-14));
  // No margin and no centring: log 2 at r_c = r_r.
  CHECK(reward_loss(leaf({2.0}), leaf({2.0}), Tensor(), 0, 1).loss.item() ==
        Approx(std::log(2.0)).epsilon(1e-15));
  CHECK_THROWS_WITH(reward_loss(rc, rr, m, 0.1, 0), Catch::Contains("normaliser"));
  CHECK_THROWS_WITH(reward_loss(rc, rr, f64({1, 2}), 0.1, 3), Catch::Contains("[P]"));
  // Two halves over the step's count sum to the whole.
  const double half = reward_loss(leaf({1.0, -0.5}), leaf({0.5, 0.25}), f64({0.25, 0}), 0.1, 6)
                          .loss.item() +
                      reward_loss(leaf({0.3}), leaf({0.3}), f64({-1}), 0.1, 6).loss.item();
  CHECK(half == Approx(r.loss.item()).epsilon(1e-14));
}

TEST_CASE("score head: score.weight [1, d] std 0.02, read at each row's last token",
          "[alignment][reward]") {
  Generator gen(5);
  const ScoreHead big(4096, gen);
  const auto named = big.named_parameters();
  REQUIRE(named.size() == 1);
  CHECK(named[0].first == "score.weight");
  CHECK(named[0].second.shape() == Shape({1, 4096}));
  double s2 = 0;
  for (float v : named[0].second.data().to_vector<float>()) s2 += double(v) * v;
  CHECK(std::sqrt(s2 / 4096) == Approx(0.02).epsilon(0.05));

  Generator gen64(6);
  const ScoreHead head(4, gen64, DType::Float64);
  const Variable hidden(Tensor::randn({2, 3, 4}, 71, 0, DType::Float64), true);
  const Tensor last = Tensor::from_vector<int64_t>({2, 0});
  const auto got = values(head.forward(hidden, last));
  for (int64_t b = 0; b < 2; ++b) {
    double want = 0;
    for (int64_t i = 0; i < 4; ++i)
      want += head.weight().data().at({0, i}) * hidden.data().at({b, b == 0 ? 2 : 0, i});
    CHECK(got[b] == Approx(want).epsilon(1e-14));
  }
  CHECK_THROWS_WITH(head.forward(hidden, Tensor::from_vector<int64_t>({3, 0})),
                    Catch::Contains("outside [0, 3)"));
  // Gradcheck of the head + reward loss w.r.t. the weight and both sides' hidden states.
  const Variable other(Tensor::randn({2, 3, 4}, 72, 0, DType::Float64), true);
  const Tensor last_r = Tensor::from_vector<int64_t>({1, 2});
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Variable>& v) {
        return reward_loss(head.forward(v[0], last), head.forward(v[1], last_r), f64({0.3, -0.2}),
                           0.05, 2)
            .loss;
      },
      {hidden, other, head.weight()});
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("hidden_states is the lm_head's input, and a reward model passes gradcheck",
          "[alignment][reward][gradcheck]") {
  const ModelConfig c = ModelConfig::from_json(
      R"({"vocab_size": 11, "d_model": 8, "n_layers": 2, "n_heads": 2, "ffn_hidden": 12,
          "max_seq_len": 8, "tie_embeddings": false})");
  Transformer model(c, 3, DType::Float64);
  const Tensor ids = Tensor::from_vector<int64_t>({1, 4, 2, 9, 3, 0, 7, 5, 5, 10}, {2, 5});
  const Variable h = model.hidden_states(ids);
  REQUIRE(h.shape() == Shape({2, 5, 8}));
  Variable head_w;
  for (const auto& [name, v] : model.named_parameters())
    if (name == "lm_head.weight") head_w = v;
  REQUIRE(head_w.defined());
  const auto logits = model.forward(ids).logits.data().to_vector<double>();
  CHECK(matmul(h, head_w, false, true).data().to_vector<double>() == logits);

  Generator gen(9);
  const ScoreHead score(8, gen, DType::Float64);
  auto params = model.parameters();
  params.push_back(score.weight());
  const Tensor last = Tensor::from_vector<int64_t>({4, 2});
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Variable>&) {
        const Variable s = score.forward(model.hidden_states(ids), last);
        return reward_loss(narrow(s, 0, 0, 1), narrow(s, 0, 1, 1), Tensor(), 0.1, 1).loss;
      },
      params);
  INFO(r.message);
  CHECK(r.ok);
}
