// dpo, ipo, simpo and orpo over the per-side sums
// (docs/model.md#preference-optimisation-and-reward-models), their options and checks, the
// loss of a step over its pair count and the summed metrics.
#include "nn/alignment/preference_loss.h"

#include <cmath>

#include "autograd/ops.h"

namespace ember::nn {
namespace {

// t (a [P] reference sum or count) as a constant in the policy's dtype.
Variable constant(const Tensor& t, const Variable& like) { return Variable(t.to(like.dtype())); }

// h = (logp_c - ref_c) - (logp_r - ref_r)
Variable reward_gap(const PairLogprobs& p) {
  return (p.logp_c - constant(p.ref_c, p.logp_c)) - (p.logp_r - constant(p.ref_r, p.logp_r));
}

// l = logp / n of each side.
Variable mean_c(const PairLogprobs& p) { return p.logp_c / constant(p.n_c, p.logp_c); }
Variable mean_r(const PairLogprobs& p) { return p.logp_r / constant(p.n_r, p.logp_r); }

bool uses_reference(PreferenceLossKind loss) {
  return loss == PreferenceLossKind::Dpo || loss == PreferenceLossKind::Ipo;
}

// Shapes: every given tensor [P], P >= 1; the references present when the loss reads them.
void check_pairs(const PreferenceOptions& options, const PairLogprobs& p, double norm) {
  EMBER_CHECK(p.logp_c.defined() && p.logp_c.dim() == 1 && p.logp_c.size(0) >= 1,
              "preference_loss: logp_c must be [P] with P >= 1");
  const Shape shape = p.logp_c.shape();
  const bool ref = uses_reference(options.loss);
  EMBER_CHECK(p.logp_r.defined() && p.logp_r.shape() == shape && p.n_c.shape() == shape &&
                  p.n_r.shape() == shape &&
                  (!ref || (p.ref_c.shape() == shape && p.ref_r.shape() == shape)),
              "preference_loss: logp_r, n_c, n_r", ref ? ", ref_c, ref_r" : "", " must be ",
              shape_str(shape), " like logp_c");
  EMBER_CHECK(norm > 0, "preference_loss: the normaliser (the step's pair count) must be > 0, got ",
              norm);
}

// Per-pair rewards of the metrics: beta (logp - ref), or beta l for simpo and orpo.
std::pair<std::vector<double>, std::vector<double>> pair_rewards(const PreferenceOptions& o,
                                                                 const PairLogprobs& p) {
  const auto values = [](const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); };
  std::vector<double> c = values(p.logp_c.data()), r = values(p.logp_r.data());
  const bool ref = uses_reference(o.loss);
  const std::vector<double> bc = values(ref ? p.ref_c : p.n_c), br = values(ref ? p.ref_r : p.n_r);
  for (size_t i = 0; i < c.size(); ++i) {
    c[i] = o.beta * (ref ? c[i] - bc[i] : c[i] / bc[i]);
    r[i] = o.beta * (ref ? r[i] - br[i] : r[i] / br[i]);
  }
  return {c, r};
}

}  // namespace

PreferenceLossKind parse_preference_loss(const std::string& name) {
  for (PreferenceLossKind k : {PreferenceLossKind::Dpo, PreferenceLossKind::Ipo,
                               PreferenceLossKind::Simpo, PreferenceLossKind::Orpo}) {
    if (name == preference_loss_name(k)) return k;
  }
  throw Error("--loss: unknown loss \"" + name + "\"; expected dpo, ipo, simpo or orpo");
}

const char* preference_loss_name(PreferenceLossKind loss) {
  switch (loss) {
    case PreferenceLossKind::Dpo: return "dpo";
    case PreferenceLossKind::Ipo: return "ipo";
    case PreferenceLossKind::Simpo: return "simpo";
    case PreferenceLossKind::Orpo: return "orpo";
  }
  return "?";
}

PreferenceOptions preference_defaults(PreferenceLossKind loss) {
  PreferenceOptions o;
  o.loss = loss;
  o.beta = loss == PreferenceLossKind::Simpo ? 2.0 : 0.1;
  return o;
}

void check_preference_options(const PreferenceOptions& o) {
  EMBER_CHECK(std::isfinite(o.beta) && o.beta > 0, "--beta must be > 0, got ", o.beta);
  EMBER_CHECK(o.label_smoothing >= 0 && o.label_smoothing < 0.5,
              "--label-smoothing must be in [0, 0.5), got ", o.label_smoothing);
  EMBER_CHECK(std::isfinite(o.simpo_gamma), "--simpo-gamma must be a finite number, got ",
              o.simpo_gamma);
  EMBER_CHECK(std::isfinite(o.sft_weight) && o.sft_weight >= 0, "--sft-weight must be >= 0, got ",
              o.sft_weight);
}

Variable dpo_loss(const PairLogprobs& p, double beta, double label_smoothing) {
  const Variable h = reward_gap(p);
  Variable loss = log_sigmoid(h * beta) * -(1 - label_smoothing);
  if (label_smoothing != 0) loss = loss - log_sigmoid(h * -beta) * label_smoothing;
  return loss;
}

Variable ipo_loss(const PairLogprobs& p, double beta) {
  const Variable hc = (p.logp_c - constant(p.ref_c, p.logp_c)) / constant(p.n_c, p.logp_c);
  const Variable hr = (p.logp_r - constant(p.ref_r, p.logp_r)) / constant(p.n_r, p.logp_r);
  const Variable d = (hc - hr) - 1 / (2 * beta);
  return d * d;
}

Variable simpo_loss(const PairLogprobs& p, double beta, double gamma) {
  return -log_sigmoid((mean_c(p) - mean_r(p)) * beta - gamma);
}

Variable orpo_loss(const PairLogprobs& p, double beta) {
  const Variable lc = mean_c(p), lr = mean_r(p);
  const Variable log_odds = (lc - lr) - (log1mexp(lc) - log1mexp(lr));
  return -lc - log_sigmoid(log_odds) * beta;
}

PreferenceMetrics& PreferenceMetrics::operator+=(const PreferenceMetrics& o) {
  loss += o.loss;
  chosen += o.chosen;
  rejected += o.rejected;
  correct += o.correct;
  pairs += o.pairs;
  return *this;
}

std::vector<std::pair<std::string, double>> PreferenceMetrics::means() const {
  const double k = pairs > 0 ? 1 / pairs : 0;
  return {{"loss", loss * k},
          {"rewards/chosen", chosen * k},
          {"rewards/rejected", rejected * k},
          {"rewards/margins", (chosen - rejected) * k},
          {"rewards/accuracy", correct * k}};
}

PreferenceLossResult preference_loss(const PreferenceOptions& o, const PairLogprobs& p,
                                     double norm) {
  check_pairs(o, p, norm);
  Variable per;
  switch (o.loss) {
    case PreferenceLossKind::Dpo: per = dpo_loss(p, o.beta, o.label_smoothing); break;
    case PreferenceLossKind::Ipo: per = ipo_loss(p, o.beta); break;
    case PreferenceLossKind::Simpo: per = simpo_loss(p, o.beta, o.simpo_gamma); break;
    case PreferenceLossKind::Orpo: per = orpo_loss(p, o.beta); break;
  }
  if (o.sft_weight != 0) per = per - mean_c(p) * o.sft_weight;
  PreferenceLossResult result;
  const Variable total = sum(per);
  result.loss = total / norm;
  const auto [c, r] = pair_rewards(o, p);
  result.sums.loss = total.item();
  result.sums.pairs = static_cast<double>(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    result.sums.chosen += c[i];
    result.sums.rejected += r[i];
    result.sums.correct += c[i] > r[i] ? 1 : 0;
  }
  return result;
}

}  // namespace ember::nn
