// The shared evaluation (see evaluation.h).
#include "apps/train/evaluation.h"

#include <algorithm>
#include <cmath>
#include <memory>
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

EvalResult evaluate(nn::Transformer& model, const data::BatchLoader& loader, int64_t batches,
                    const std::vector<int64_t>& token_bytes, bool with_grads) {
  EMBER_CHECK(batches > 0, "evaluate: needs at least one batch, got ", batches);
  const bool was_training = model.is_training();
  model.eval();
  struct RestoreMode {
    nn::Transformer& m;
    bool training;
    ~RestoreMode() { m.train(training); }
  } restore{model, was_training};
  std::unique_ptr<NoGradGuard> no_grad = with_grads ? nullptr : std::make_unique<NoGradGuard>();
  const int64_t T = loader.options().seq_len;
  const double n = static_cast<double>(batches);
  EvalResult r;
  r.batches = batches;
  r.per_byte = !token_bytes.empty();
  double ce = 0, total = 0, z = 0, aux = 0, router_z = 0;
  for (int64_t i = 0; i < batches; ++i) {
    const Tensor b = loader.batch(i, 0);
    const Tensor x = b.narrow(1, 0, T).contiguous(), y = b.narrow(1, 1, T).contiguous();
    const nn::LossTerms l = model.loss(model.forward(x), y);
    if (with_grads) (l.total / n).backward();
    ce += l.ce;
    total += l.total.item();
    z += l.z;
    aux += l.aux;
    router_z += l.router_z;
    r.tokens += y.numel();
    if (r.per_byte) {
      for (int64_t t : y.to_vector<int64_t>()) r.bytes += token_bytes.at(static_cast<size_t>(t));
    }
  }
  if (!r.per_byte) r.bytes = r.tokens;
  r.loss = ce / n;
  r.total = total / n;
  r.z = z / n;
  r.aux = aux / n;
  r.router_z = router_z / n;
  // Every batch has B x T targets, so the mean of the batch means is the mean per token.
  r.bits_per_byte = r.loss * static_cast<double>(r.tokens) / (std::log(2.0) * static_cast<double>(std::max<int64_t>(r.bytes, 1)));
  return r;
}

}  // namespace ember::apps
