// Batches of preference pairs: each pair's two sides copied into padded rows (chosen rows, then
// rejected rows) with the scored mask shifted onto the targets, in chat data's order.
#include "data/preference_loader.h"

#include "core/error.h"

namespace ember::data {
namespace {

// Side `side` into row `row` of tokens [., T+1] and scored [., T]: scored[i] (i >= 1) marks
// target i - 1.
void put_side(const PreferenceSide& side, int64_t row, int64_t T, int64_t* tokens, float* scored) {
  const int64_t len = static_cast<int64_t>(side.ids.size());
  EMBER_CHECK(len <= T + 1, "preference batch: a side of ", len, " ids exceeds T+1 = ", T + 1);
  for (int64_t t = 0; t < len; ++t) tokens[row * (T + 1) + t] = side.ids[static_cast<size_t>(t)];
  for (int64_t t = 1; t < len; ++t)
    if (side.scored[static_cast<size_t>(t)]) scored[row * T + t - 1] = 1.0f;
}

}  // namespace

PairBatch pair_batch(const std::vector<PreferencePair>& pairs, const std::vector<int64_t>& index,
                     int64_t seq_len) {
  const int64_t B = static_cast<int64_t>(index.size()), T = seq_len;
  PairBatch out;
  out.tokens = Tensor::zeros({2 * B, T + 1}, DType::Int64);
  out.scored = Tensor::zeros({2 * B, T}, DType::Float32);
  int64_t* tokens = out.tokens.data<int64_t>();
  float* scored = out.scored.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const PreferencePair& p = pairs.at(static_cast<size_t>(index[static_cast<size_t>(b)]));
    put_side(p.chosen, b, T, tokens, scored);
    put_side(p.rejected, B + b, T, tokens, scored);
  }
  out.pairs = index;
  return out;
}

PairLoader::PairLoader(std::shared_ptr<const std::vector<PreferencePair>> pairs,
                       BatchLoaderOptions options)
    : pairs_(std::move(pairs)),
      opt_(options),
      shuffle_(static_cast<int64_t>(pairs_->size()), opt_.seed) {
  EMBER_CHECK(opt_.batch > 0 && opt_.grad_accum > 0 && opt_.world > 0 && opt_.rank >= 0 &&
                  opt_.rank < opt_.world && opt_.seq_len >= 1,
              "PairLoader: invalid batch ", opt_.batch, ", grad_accum ", opt_.grad_accum,
              ", world ", opt_.world, ", rank ", opt_.rank, ", seq_len ", opt_.seq_len);
  EMBER_CHECK(!pairs_->empty(), "PairLoader: no pair");
}

int64_t PairLoader::pair(int64_t step, int64_t micro, int64_t b) const {
  const int64_t slot = ((step * opt_.grad_accum + micro) * opt_.world + opt_.rank) * opt_.batch + b;
  return opt_.sequential ? slot % num_pairs() : shuffle_(slot);
}

std::vector<PairBatch> pair_halves(const std::vector<PreferencePair>& pairs,
                                   const std::vector<int64_t>& index, int64_t seq_len) {
  const auto middle = index.begin() + static_cast<std::ptrdiff_t>((index.size() + 1) / 2);
  std::vector<PairBatch> halves;
  halves.push_back(pair_batch(pairs, {index.begin(), middle}, seq_len));
  if (middle != index.end()) halves.push_back(pair_batch(pairs, {middle, index.end()}, seq_len));
  return halves;
}

std::vector<int64_t> PairLoader::batch_pairs(int64_t step, int64_t micro) const {
  std::vector<int64_t> index;
  for (int64_t b = 0; b < opt_.batch; ++b) index.push_back(pair(step, micro, b));
  return index;
}

PairBatch PairLoader::batch(int64_t step, int64_t micro) const {
  return pair_batch(*pairs_, batch_pairs(step, micro), opt_.seq_len);
}

}  // namespace ember::data
