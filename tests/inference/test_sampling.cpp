// TokenSampler on hand-made distributions: greedy, temperature, top-k and
// top-p keep exactly the tokens they should (and combine as top-k then top-p),
// ties go to the lower id, the repetition penalty, the vocabulary limit, seeded
// draws repeat and follow the distribution, and bad options are errors naming
// the option.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "inference/sample/sampler.h"

using namespace ember;
using namespace ember::inference;

namespace {

// Logits log(p) of p = {0.05, 0.40, 0.10, 0.25, 0.20}: by probability 1, 3, 4, 2, 0.
Tensor hand_made(DType dtype = DType::Float64) {
  const std::vector<double> p = {0.05, 0.40, 0.10, 0.25, 0.20};
  std::vector<double> z;
  for (const double x : p) z.push_back(std::log(x));
  return Tensor::from_vector(z, {1, 1, 5}).to(dtype);
}

Candidates filter(const Tensor& logits, double temperature, int64_t top_k, double top_p,
                  const std::vector<int64_t>& history = {}, double penalty = 1) {
  SamplingOptions opt;
  opt.temperature = temperature;
  opt.top_k = top_k;
  opt.top_p = top_p;
  opt.repetition_penalty = penalty;
  return TokenSampler(opt).candidates(logits, history);
}

void check_probs(const Candidates& c, const std::vector<double>& want, double eps = 1e-12) {
  REQUIRE(c.probs.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(c.probs[i] == Approx(want[i]).epsilon(eps));
}

}  // namespace

TEST_CASE("greedy takes the argmax, ties to the lower id", "[sampling]") {
  CHECK(filter(hand_made(), 0, 0, 1).tokens == std::vector<int64_t>{1});
  const Tensor tied = Tensor::from_vector(std::vector<float>{0.5f, 2.0f, -1.0f, 2.0f});
  const Candidates c = filter(tied, 0, 0, 1);
  CHECK(c.tokens == std::vector<int64_t>{1});
  check_probs(c, {1.0});
}

TEST_CASE("greedy over long rows: the first maximum as a plain loop finds it, NaN and inf refused",
          "[sampling]") {
  SamplingOptions greedy;
  greedy.temperature = 0;
  for (const int64_t V : {1, 15, 16, 17, 1000, 50257}) {
    for (const int64_t at : {int64_t{0}, V / 2, V - 1}) {
      std::vector<float> z(static_cast<size_t>(V));
      for (int64_t i = 0; i < V; ++i) z[i] = static_cast<float>(std::sin(0.37 * i)) - 2;
      z[at] = 7;
      if (at + 20 < V) z[at + 20] = 7;  // a tie in another lane: the lower id wins
      int64_t want = 0;                 // the reference: a plain loop keeping the first maximum
      for (int64_t i = 1; i < V; ++i) want = z[i] > z[want] ? i : want;
      INFO("V " << V << ", max at " << at);
      CHECK(TokenSampler(greedy).sample(Tensor::from_vector(z)) == want);
      CHECK(TokenSampler(greedy).sample(Tensor::from_vector(z).to(DType::Float64)) == want);
      z[V - 1] = std::nanf("");
      CHECK_THROWS_WITH(TokenSampler(greedy).sample(Tensor::from_vector(z)), Catch::Contains("NaN"));
      z[V - 1] = std::numeric_limits<float>::infinity();
      CHECK_THROWS_WITH(TokenSampler(greedy).sample(Tensor::from_vector(z)),
                        Catch::Contains("no finite value"));
    }
  }
  const std::vector<float> none(40, -std::numeric_limits<float>::infinity());
  CHECK_THROWS_WITH(TokenSampler(greedy).sample(Tensor::from_vector(none)),
                    Catch::Contains("no finite value"));
}

TEST_CASE("no filter: the whole softmax in id order, temperature sharpens or flattens",
          "[sampling]") {
  const Candidates c = filter(hand_made(), 1, 0, 1);
  CHECK(c.tokens == std::vector<int64_t>{0, 1, 2, 3, 4});
  check_probs(c, {0.05, 0.40, 0.10, 0.25, 0.20});
  CHECK(filter(hand_made(), 1, 0, 1).tokens == filter(hand_made(), 1, 5, 1).tokens);
  // Temperature 2: p^(1/2), renormalised.
  std::vector<double> want;
  double total = 0;
  for (const double p : {0.05, 0.40, 0.10, 0.25, 0.20}) total += std::sqrt(p);
  for (const double p : {0.05, 0.40, 0.10, 0.25, 0.20}) want.push_back(std::sqrt(p) / total);
  check_probs(filter(hand_made(), 2, 0, 1), want);
  check_probs(filter(hand_made(DType::Float32), 1, 0, 1), {0.05, 0.40, 0.10, 0.25, 0.20}, 1e-6);
}

TEST_CASE("top-k keeps exactly the k most probable tokens", "[sampling]") {
  const Candidates k2 = filter(hand_made(), 1, 2, 1);
  CHECK(k2.tokens == std::vector<int64_t>{1, 3});
  check_probs(k2, {0.40 / 0.65, 0.25 / 0.65});
  CHECK(filter(hand_made(), 1, 1, 1).tokens == std::vector<int64_t>{1});
  const Candidates k4 = filter(hand_made(), 1, 4, 1);
  CHECK(k4.tokens == std::vector<int64_t>{1, 2, 3, 4});  // id order
  check_probs(k4, {0.40 / 0.95, 0.10 / 0.95, 0.25 / 0.95, 0.20 / 0.95});
  CHECK(filter(hand_made(), 1, 99, 1).tokens == std::vector<int64_t>{0, 1, 2, 3, 4});
  // Ties at the cut: the lower id is kept.
  const Tensor tied = Tensor::from_vector(std::vector<double>{1.0, 3.0, 2.0, 2.0, 2.0});
  CHECK(filter(tied, 1, 3, 1).tokens == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("top-p keeps the smallest most-probable set whose mass reaches p", "[sampling]") {
  CHECK(filter(hand_made(), 1, 0, 0.3).tokens == std::vector<int64_t>{1});
  CHECK(filter(hand_made(), 1, 0, 0.4).tokens == std::vector<int64_t>{1});  // exactly reached
  CHECK(filter(hand_made(), 1, 0, 0.6).tokens == std::vector<int64_t>{1, 3});
  CHECK(filter(hand_made(), 1, 0, 0.65).tokens == std::vector<int64_t>{1, 3});
  const Candidates p07 = filter(hand_made(), 1, 0, 0.7);
  CHECK(p07.tokens == std::vector<int64_t>{1, 3, 4});
  check_probs(p07, {0.40 / 0.85, 0.25 / 0.85, 0.20 / 0.85});
  CHECK(filter(hand_made(), 1, 0, 0.9).tokens == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(filter(hand_made(), 1, 0, 0.99).tokens == std::vector<int64_t>{0, 1, 2, 3, 4});
  // After top-k 3 the mass is renormalised over {1, 3, 4}: 0.47, 0.29, 0.24.
  CHECK(filter(hand_made(), 1, 3, 0.7).tokens == std::vector<int64_t>{1, 3});
  CHECK(filter(hand_made(), 1, 3, 0.8).tokens == std::vector<int64_t>{1, 3, 4});
  // A large vocabulary where the nucleus is longer than the first sorted block.
  std::vector<double> flat(1000, 0.0);
  flat[7] = 3.0;
  const Candidates big = filter(Tensor::from_vector(flat), 1, 0, 0.5);
  const double p7 = std::exp(3.0) / (std::exp(3.0) + 999), rest = 1 / (std::exp(3.0) + 999);
  CHECK(big.tokens.size() == static_cast<size_t>(1 + std::ceil((0.5 - p7) / rest - 1e-9)));
  // Token 7 and the lowest ids of the tied rest, listed in id order.
  std::vector<int64_t> want = {7};
  for (int64_t i = 0; want.size() < big.tokens.size(); ++i) {
    if (i != 7) want.push_back(i);
  }
  std::sort(want.begin(), want.end());
  CHECK(big.tokens == want);
}

TEST_CASE("repetition penalty divides positive and multiplies negative logits of seen tokens",
          "[sampling]") {
  const Tensor z = Tensor::from_vector(std::vector<double>{2.0, -1.0, 1.0, 0.5});
  // Seen 0 and 1 (0 twice: penalised once): {1.0, -2.0, 1.0, 0.5}.
  const Candidates c = filter(z, 1, 0, 1, {0, 1, 0}, 2.0);
  const double e[] = {std::exp(1.0), std::exp(-2.0), std::exp(1.0), std::exp(0.5)};
  const double total = e[0] + e[1] + e[2] + e[3];
  check_probs(c, {e[0] / total, e[1] / total, e[2] / total, e[3] / total});
  CHECK(filter(z, 0, 0, 1, {0, 1, 0}, 2.0).tokens == std::vector<int64_t>{0});  // tie 0/2 -> 0
  CHECK(filter(z, 0, 0, 1, {0}, 4.0).tokens == std::vector<int64_t>{2});
  CHECK(filter(z, 0, 0, 1, {0}, 1.0).tokens == std::vector<int64_t>{0});  // off by default
}

TEST_CASE("seeded draws repeat, stay inside the kept set and follow the distribution",
          "[sampling]") {
  SamplingOptions opt;
  opt.seed = 1234;
  TokenSampler a(opt), b(opt);
  std::vector<int> counts(5, 0);
  const int n = 20000;
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t t = a.sample(hand_made());
    mismatches += t != b.sample(hand_made());
    ++counts[t];
  }
  CHECK(mismatches == 0);
  const double p[] = {0.05, 0.40, 0.10, 0.25, 0.20};
  for (int i = 0; i < 5; ++i) {
    const double sd = std::sqrt(p[i] * (1 - p[i]) / n);
    CHECK(std::abs(counts[i] / static_cast<double>(n) - p[i]) < 5 * sd);
  }
  CHECK(a.generator().offset == static_cast<uint64_t>(n));
  opt.top_k = 3;
  opt.top_p = 0.7;  // {1, 3} only
  TokenSampler c(opt);
  int outside = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t t = c.sample(hand_made());
    outside += t != 1 && t != 3;
  }
  CHECK(outside == 0);
}

TEST_CASE("vocab_limit: only ids below it are drawn, the rest of the softmax renormalised",
          "[sampling]") {
  // p = {0.05, 0.40, 0.10, 0.25, 0.20} cut to the first 3 ids: {0.05, 0.40, 0.10} / 0.55.
  SamplingOptions opt;
  opt.vocab_limit = 3;
  Candidates c = TokenSampler(opt).candidates(hand_made());
  CHECK(c.tokens == std::vector<int64_t>{0, 1, 2});
  check_probs(c, {0.05 / 0.55, 0.40 / 0.55, 0.10 / 0.55});
  // The argmax (id 1 of all five) beyond a limit of 1: greedy takes id 0.
  opt.temperature = 0;
  opt.vocab_limit = 1;
  CHECK(TokenSampler(opt).candidates(hand_made()).tokens == std::vector<int64_t>{0});
  // top-k among the kept ids: the 2 most probable of {0, 1, 2} are 1 and 2.
  opt = {};
  opt.vocab_limit = 3;
  opt.top_k = 2;
  c = TokenSampler(opt).candidates(hand_made());
  CHECK(c.tokens == std::vector<int64_t>{1, 2});
  check_probs(c, {0.40 / 0.50, 0.10 / 0.50});
  // A limit at or above the logits' size changes nothing; draws never leave the kept ids.
  opt = {};
  opt.vocab_limit = 50;
  CHECK(TokenSampler(opt).candidates(hand_made()).tokens.size() == 5);
  opt.vocab_limit = 2;
  opt.seed = 9;
  TokenSampler d(opt);
  int outside = 0;
  for (int i = 0; i < 2000; ++i) outside += d.sample(hand_made()) >= 2;
  CHECK(outside == 0);
}

TEST_CASE("bad sampling options are errors naming the option", "[sampling]") {
  SamplingOptions opt;
  opt.temperature = -1;
  CHECK_THROWS_WITH(TokenSampler(opt), Catch::Contains("temperature"));
  opt = {};
  opt.top_k = -2;
  CHECK_THROWS_WITH(TokenSampler(opt), Catch::Contains("top_k"));
  opt = {};
  opt.top_p = 0;
  CHECK_THROWS_WITH(TokenSampler(opt), Catch::Contains("top_p"));
  opt.top_p = 1.5;
  CHECK_THROWS_WITH(TokenSampler(opt), Catch::Contains("top_p"));
  opt = {};
  opt.repetition_penalty = 0;
  CHECK_THROWS_WITH(TokenSampler(opt), Catch::Contains("repetition_penalty"));
  opt = {};
  opt.max_tokens = -1;
  CHECK_THROWS_WITH(TokenSampler(opt), Catch::Contains("max_tokens"));
  opt = {};
  opt.vocab_limit = -1;
  CHECK_THROWS_WITH(TokenSampler(opt), Catch::Contains("vocab_limit"));
  CHECK_THROWS_WITH(TokenSampler({}).candidates(Tensor::zeros({2, 3})), Catch::Contains("one row"));
  const Tensor nan = Tensor::from_vector(std::vector<float>{0.5f, std::nanf(""), 1.0f});
  CHECK_THROWS_WITH(TokenSampler({}).candidates(nan), Catch::Contains("NaN"));
}
