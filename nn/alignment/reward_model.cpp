// ScoreHead (a bias-free Linear to one output, gathered at each row's last token) and the
// Bradley-Terry reward loss with margin and centring (docs/model.md#reward-model).
#include "nn/alignment/reward_model.h"

#include <cmath>

#include "autograd/ops.h"

namespace ember::nn {

ScoreHead::ScoreHead(int64_t d_model, Generator& gen, DType dtype) {
  score_ = register_module("score", std::make_shared<Linear>(d_model, 1, false, gen, 0.02, dtype));
}

Variable ScoreHead::forward(const Variable& hidden, const Tensor& last) const {
  EMBER_CHECK(hidden.dim() == 3 && hidden.size(2) == weight().size(1),
              "ScoreHead: hidden states must be [B, T, ", weight().size(1), "], got ",
              shape_str(hidden.shape()));
  const int64_t B = hidden.size(0), T = hidden.size(1), C = hidden.size(2);
  EMBER_CHECK(last.dim() == 1 && last.size(0) == B, "ScoreHead: last-token indices of shape ",
              shape_str(last.shape()), " do not give one per row of ", shape_str(hidden.shape()));
  const std::vector<int64_t> idx = last.to(DType::Int64).to_vector<int64_t>();
  std::vector<int64_t> rows(B);
  for (int64_t b = 0; b < B; ++b) {
    EMBER_CHECK(idx[b] >= 0 && idx[b] < T, "ScoreHead: last token ", idx[b], " of row ", b,
                " is outside [0, ", T, ")");
    rows[b] = b * T + idx[b];
  }
  const Variable h = index_select(reshape(hidden, {B * T, C}), 0, Tensor::from_vector(rows));
  return reshape(score_->forward(h), {B});
}

RewardMetrics& RewardMetrics::operator+=(const RewardMetrics& o) {
  loss += o.loss;
  correct += o.correct;
  margin += o.margin;
  pairs += o.pairs;
  return *this;
}

std::vector<std::pair<std::string, double>> RewardMetrics::means() const {
  const double k = pairs > 0 ? 1 / pairs : 0;
  return {{"loss", loss * k}, {"accuracy", correct * k}, {"margin", margin * k}};
}

RewardLossResult reward_loss(const Variable& r_c, const Variable& r_r, const Tensor& margin,
                             double center_coef, double norm) {
  EMBER_CHECK(r_c.dim() == 1 && r_c.size(0) >= 1 && r_r.shape() == r_c.shape() &&
                  (!margin.defined() || margin.shape() == r_c.shape()),
              "reward_loss: r_c, r_r and the margins must all be [P] with P >= 1, got ",
              shape_str(r_c.shape()), ", ", shape_str(r_r.shape()), " and ",
              margin.defined() ? shape_str(margin.shape()) : std::string("none"));
  EMBER_CHECK(std::isfinite(center_coef) && center_coef >= 0,
              "reward_loss: the centring coefficient must be >= 0, got ", center_coef);
  EMBER_CHECK(norm > 0, "reward_loss: the normaliser (the step's pair count) must be > 0, got ",
              norm);
  const Variable gap = r_c - r_r;
  Variable per = -log_sigmoid(margin.defined() ? gap - Variable(margin.to(gap.dtype())) : gap);
  if (center_coef != 0) {
    const Variable s = r_c + r_r;
    per = per + s * s * center_coef;
  }
  RewardLossResult result;
  const Variable total = sum(per);
  result.loss = total / norm;
  result.sums.loss = total.item();
  const std::vector<double> g = gap.data().to(DType::Float64).to_vector<double>();
  result.sums.pairs = static_cast<double>(g.size());
  for (double v : g) {
    result.sums.correct += v > 0 ? 1 : 0;
    result.sums.margin += v;
  }
  return result;
}

}  // namespace ember::nn
