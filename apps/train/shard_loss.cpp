// The shared evaluation (see evaluation.h).
#include "apps/train/shard_loss.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace ember::apps {

std::vector<int64_t> token_byte_lengths(const data::Tokenizer& tokenizer, int64_t vocab_size) {
  std::vector<int64_t> out(static_cast<size_t>(vocab_size), 0);
  std::set<uint32_t> specials;
  for (const data::SpecialToken& s : tokenizer.special_tokens()) specials.insert(s.id);
  const int64_t known = std::min<int64_t>(vocab_size, static_cast<int64_t>(tokenizer.vocab_size()));
  for (int64_t id = 0; id < known; ++id) {
    const uint32_t u = static_cast<uint32_t>(id);
    if (specials.count(u)) continue;
    out[static_cast<size_t>(id)] = static_cast<int64_t>(tokenizer.decode(std::span<const uint32_t>(&u, 1)).size());
  }
  return out;
}

namespace {

double bits_per_byte(double loss, int64_t tokens, int64_t bytes) {
  return loss * static_cast<double>(tokens) /
         (std::log(2.0) * static_cast<double>(std::max<int64_t>(bytes, 1)));
}

}  // namespace

void ShardLossSums::add(const nn::LossTerms& l) {
  ++batches;
  ce += l.ce;
  total += l.total.defined() ? l.total.item() : 0.0;
  z += l.z;
  aux += l.aux;
  router_z += l.router_z;
}

void ShardLossSums::count_targets(const Tensor& targets, const std::vector<int64_t>& token_bytes) {
  tokens += targets.numel();
  if (token_bytes.empty()) return;
  for (int64_t t : targets.to_vector<int64_t>()) bytes += token_bytes.at(static_cast<size_t>(t));
}

ShardLoss ShardLossSums::mean(bool per_byte) const {
  const double n = static_cast<double>(batches);
  ShardLoss r;
  r.batches = batches;
  r.per_byte = per_byte;
  r.tokens = tokens;
  r.bytes = per_byte ? bytes : tokens;
  r.loss = ce / n;
  r.total = total / n;
  r.z = z / n;
  r.aux = aux / n;
  r.router_z = router_z / n;
  // Every batch has B x T targets, so the mean of the batch means is the mean per token.
  r.bits_per_byte = bits_per_byte(r.loss, r.tokens, r.bytes);
  return r;
}

ShardLoss shard_loss(nn::Transformer& model, const data::BatchLoader& loader, int64_t batches,
                    const std::vector<int64_t>& token_bytes, bool with_grads) {
  EMBER_CHECK(batches > 0, "evaluate: needs at least one batch, got ", batches);
  const nn::EvalModeGuard eval(model);
  std::optional<NoGradGuard> no_grad;
  if (!with_grads) no_grad.emplace();
  const int64_t T = loader.options().seq_len;
  ShardLossSums sums;
  for (int64_t i = 0; i < batches; ++i) {
    const Tensor b = loader.batch(i, 0);
    const Tensor x = b.narrow(1, 0, T).contiguous(), y = b.narrow(1, 1, T).contiguous();
    const nn::LossTerms l = model.loss(model.forward(x), y);
    if (with_grads) (l.total / static_cast<double>(batches)).backward();
    sums.add(l);
    sums.count_targets(y, token_bytes);
  }
  return sums.mean(!token_bytes.empty());
}

ShardLoss chat_shard_loss(nn::Transformer& model, std::shared_ptr<const data::ChatRows> rows,
                         int64_t rows_per_batch, const std::vector<int64_t>& token_bytes) {
  const nn::EvalModeGuard eval(model);
  return chat_shard_loss(std::move(rows), rows_per_batch, token_bytes,
                         [&model](const Tensor& x, const Tensor& y, const Tensor& weight) {
                           return model.loss(model.forward(x), y, weight, 1.0, 0.0);
                         });
}

ShardLoss chat_shard_loss(std::shared_ptr<const data::ChatRows> rows, int64_t rows_per_batch,
                          const std::vector<int64_t>& token_bytes, const ChatBatchLoss& loss) {
  const NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(rows->rows.size()), T = rows->seq_len;
  const data::ChatLoader loader(rows,
                                data::BatchLoaderOptions{rows_per_batch, T, 1, 1, 0, true, 0});
  ShardLoss r;
  r.per_byte = !token_bytes.empty();
  double ce = 0, z = 0;
  for (int64_t first = 0; first < n; first += rows_per_batch, ++r.batches) {
    data::ChatBatch b = loader.batch(r.batches, 0);
    // The last batch wraps around to the first conversations: those rows count nothing.
    const int64_t wrapped = std::max<int64_t>(0, first + rows_per_batch - n);
    if (wrapped > 0) b.trained.narrow(0, rows_per_batch - wrapped, wrapped).fill_(0.0);
    const Tensor y = b.tokens.narrow(1, 1, T).contiguous();
    const nn::LossTerms l = loss(b.tokens.narrow(1, 0, T).contiguous(), y, b.trained);
    ce += l.ce;
    z += l.z;
    const std::vector<int64_t> targets = y.to_vector<int64_t>();
    const std::vector<float> trained = b.trained.to_vector<float>();
    for (size_t i = 0; i < targets.size(); ++i) {
      if (trained[i] == 0) continue;
      ++r.tokens;
      if (r.per_byte) r.bytes += token_bytes.at(static_cast<size_t>(targets[i]));
    }
  }
  EMBER_CHECK(r.tokens > 0, "validation: the held-out conversations have no trained token");
  if (!r.per_byte) r.bytes = r.tokens;
  r.loss = ce / static_cast<double>(r.tokens);
  r.z = z / static_cast<double>(r.tokens);
  r.total = r.loss;
  r.bits_per_byte = bits_per_byte(r.loss, r.tokens, r.bytes);
  return r;
}

}  // namespace ember::apps
