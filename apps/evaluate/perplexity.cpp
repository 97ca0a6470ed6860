// Rolling-window perplexity and bits per byte (see perplexity.h).
#include "apps/evaluate/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ember::apps {

std::vector<ScoredSequence> rolling_windows(const std::vector<int64_t>& ids, int64_t prefix,
                                            int64_t seq_len, int64_t stride) {
  const int64_t n = ids.size();
  std::vector<ScoredSequence> windows;
  // Targets [lo, hi): token i is predicted from inputs up to i - 1, at most seq_len of them.
  for (int64_t lo = prefix, hi = std::min(n, std::max(seq_len + 1, prefix + 1)); lo < n;
       lo = hi, hi = std::min(n, hi + stride)) {
    const int64_t start = std::max<int64_t>(0, hi - 1 - seq_len);
    ScoredSequence w;
    w.tokens.assign(ids.begin() + start, ids.begin() + hi);
    w.targets = hi - lo;
    windows.push_back(std::move(w));
  }
  return windows;
}

TextMetrics evaluate_text(nn::Transformer& model, const data::Tokenizer& tokenizer,
                          const std::string& text, int64_t seq_len, int64_t stride,
                          int64_t batch_size, const TextProgress& progress,
                          const inference::InferenceModel* inference) {
  const int64_t max_len = model.config().max_seq_len;
  if (seq_len == 0) seq_len = max_len;
  if (stride == 0) stride = seq_len;
  EMBER_CHECK(seq_len > 0 && seq_len <= max_len, "--seq-len must be 1 to the model's max_seq_len ",
              max_len, ", got ", seq_len);
  EMBER_CHECK(stride > 0 && stride <= seq_len, "--stride must be 1 to --seq-len (", seq_len,
              "), got ", stride);
  EMBER_CHECK(!text.empty(), "the text is empty: nothing to score");
  std::vector<int64_t> ids = document_prefix(tokenizer);
  const int64_t prefix = ids.size();
  for (const uint32_t t : tokenizer.encode(text)) ids.push_back(t);
  const std::vector<ScoredSequence> windows = rolling_windows(ids, prefix, seq_len, stride);
  TextMetrics m;
  m.windows = windows.size();
  for (size_t first = 0; first < windows.size(); first += batch_size) {
    const size_t end = std::min(windows.size(), first + batch_size);
    const std::vector<ScoredSequence> part(windows.begin() + first, windows.begin() + end);
    for (const double s : score_sequences(model, part, batch_size, inference)) m.nats -= s;
    if (progress) progress(end, windows.size());
  }
  m.tokens = ids.size() - prefix;
  m.bytes = text.size();
  m.nats_per_token = m.nats / m.tokens;
  m.perplexity = std::exp(m.nats_per_token);
  m.bits_per_byte = m.nats / std::log(2.0) / m.bytes;
  return m;
}

}  // namespace ember::apps
