// Batched continuation log-likelihoods and lm-evaluation-harness's pair split
// (see loglikelihood.h).
#include "apps/evaluate/loglikelihood.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace ember::apps {
namespace {

// log softmax(row)[target] in double: row[target] - max - log sum exp(row - max).
template <typename T>
double log_prob(const T* row, int64_t V, int64_t target) {
  double m = row[0];
  for (int64_t v = 1; v < V; ++v) m = std::max(m, static_cast<double>(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - m);
  return static_cast<double>(row[target]) - m - std::log(sum);
}

// Scores sequences[first .. first + count) with one forward; writes out[first ..].
void score_batch(const nn::Transformer& model, const std::vector<ScoredSequence>& sequences,
                 size_t first, size_t count, std::vector<double>& out) {
  int64_t L = 1;
  for (size_t r = 0; r < count; ++r)
    L = std::max<int64_t>(L, sequences[first + r].tokens.size() - 1);
  std::vector<int64_t> ids(count * L, 0);  // right padding with token 0
  for (size_t r = 0; r < count; ++r) {
    const std::vector<int64_t>& s = sequences[first + r].tokens;
    std::copy(s.begin(), s.end() - 1, ids.begin() + r * L);
  }
  const Tensor logits = model.forward(Tensor::from_vector(ids, {static_cast<int64_t>(count), L}))
                            .logits.data()
                            .contiguous();
  const int64_t V = logits.size(2);
  dispatch_float(logits.dtype(), "score_sequences", [&](auto tag) {
    using T = decltype(tag);
    const T* base = logits.data<T>();
    for (size_t r = 0; r < count; ++r) {
      const ScoredSequence& s = sequences[first + r];
      const int64_t n = s.tokens.size();
      double total = 0;
      for (int64_t i = n - s.targets; i < n; ++i) {  // token i is predicted at position i - 1
        total += log_prob(base + (r * L + i - 1) * V, V, s.tokens[i]);
      }
      out[first + r] = total;
    }
  });
}

// The same on the paged inference forward: each sequence's tokens but the last as one chunk
// with every position's logits, its keys and values in one cache reused by the next sequence.
void score_paged(const inference::InferenceModel& im, const std::vector<ScoredSequence>& sequences,
                 std::vector<double>& out) {
  int64_t L = 1;
  for (const ScoredSequence& s : sequences) L = std::max<int64_t>(L, s.tokens.size() - 1);
  const int64_t blocks = (L + inference::kKVBlockSize - 1) / inference::kKVBlockSize;
  inference::PagedKVStore kv(im.config(), blocks);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(b);
  for (size_t r = 0; r < sequences.size(); ++r) {
    const ScoredSequence& s = sequences[r];
    const int64_t n = s.tokens.size();
    inference::SeqChunk chunk;
    chunk.tokens = s.tokens.data();
    chunk.n_tokens = n - 1;
    chunk.block_table = &table;
    chunk.all_logits = true;
    const Tensor logits = im.forward({chunk}, kv);
    const int64_t V = logits.size(1);
    double total = 0;
    for (int64_t i = n - s.targets; i < n; ++i) total += log_prob(logits.data<float>() + (i - 1) * V, V, s.tokens[i]);
    out[r] = total;
  }
}

}  // namespace

std::vector<double> score_sequences(nn::Transformer& model,
                                    const std::vector<ScoredSequence>& sequences,
                                    int64_t batch_size, const inference::InferenceModel* inference) {
  EMBER_CHECK(batch_size > 0, "score_sequences: batch size must be positive, got ", batch_size);
  const int64_t max_len = model.config().max_seq_len, V = model.config().vocab_size;
  std::vector<size_t> pending;  // the sequences with something to score
  for (size_t i = 0; i < sequences.size(); ++i) {
    const ScoredSequence& s = sequences[i];
    const int64_t n = s.tokens.size();
    EMBER_CHECK(s.targets >= 0 && s.targets < std::max<int64_t>(n, 1) && n - 1 <= max_len,
                "score_sequences: sequence ", i, " has ", n, " tokens and ", s.targets,
                " targets (model context ", max_len, ")");
    for (const int64_t t : s.tokens)
      EMBER_CHECK(t >= 0 && t < V, "token id ", t, " is outside the model's vocabulary (", V, ")");
    if (s.targets > 0) pending.push_back(i);
  }
  std::vector<ScoredSequence> packed;  // the pending ones, contiguous for score_batch
  for (const size_t i : pending) packed.push_back(sequences[i]);
  std::vector<double> packed_scores(packed.size()), scores(sequences.size(), 0.0);
  const nn::EvalModeGuard eval(model);
  NoGradGuard no_grad;
  if (inference) {
    score_paged(*inference, packed, packed_scores);
  } else {
    for (size_t first = 0; first < packed.size(); first += batch_size) {
      score_batch(model, packed, first, std::min<size_t>(batch_size, packed.size() - first),
                  packed_scores);
    }
  }
  for (size_t k = 0; k < pending.size(); ++k) scores[pending[k]] = packed_scores[k];
  return scores;
}

std::vector<int64_t> document_prefix(const data::Tokenizer& tokenizer) {
  if (const std::optional<uint32_t> eot = tokenizer.find_special(data::kEndOfText)) return {*eot};
  const std::vector<uint32_t> newline = tokenizer.encode("\n");
  return std::vector<int64_t>(newline.begin(), newline.end());
}

SplitPair split_pair(const data::Tokenizer& tokenizer, const std::string& context,
                     const std::string& continuation) {
  const size_t keep =
      context.find_last_not_of(" \t\n\r\f\v") + 1;  // npos + 1 == 0: all white space
  const std::string head = context.substr(0, keep), tail = context.substr(keep) + continuation;
  auto encode = [&](const std::string& text) {
    const std::vector<uint32_t> ids = tokenizer.encode(text);
    return std::vector<int64_t>(ids.begin(), ids.end());
  };
  SplitPair pair;
  if (head.empty()) {
    pair.context = document_prefix(tokenizer);
    pair.continuation = encode(tail);
    return pair;
  }
  const std::vector<int64_t> whole = encode(head + tail);
  pair.context = encode(head);
  const size_t cut = std::min(pair.context.size(), whole.size());
  pair.continuation.assign(whole.begin() + cut, whole.end());
  return pair;
}

ScoredSequence scored_pair(const SplitPair& pair, int64_t max_len) {
  const int64_t k = pair.continuation.size();
  EMBER_CHECK(k <= max_len, "a choice of ", k, " tokens is longer than the model's context (",
              max_len, " tokens)");
  ScoredSequence s;
  s.tokens = pair.context;
  s.tokens.insert(s.tokens.end(), pair.continuation.begin(), pair.continuation.end());
  const int64_t n = s.tokens.size();
  if (n > max_len + 1) s.tokens.erase(s.tokens.begin(), s.tokens.begin() + (n - max_len - 1));
  s.targets = k;
  return s;
}

}  // namespace ember::apps
