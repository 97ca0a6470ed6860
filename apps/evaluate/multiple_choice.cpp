// Multiple-choice accuracy (see multiple_choice.h).
#include "apps/evaluate/multiple_choice.h"

#include <cmath>
#include <limits>

#include "apps/evaluate/loglikelihood.h"
#include "core/error.h"

namespace ember::apps {

int64_t utf8_length(const std::string& text) {
  int64_t n = 0;
  for (const unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

int64_t first_argmax(const std::vector<double>& values) {
  int64_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[best]) best = static_cast<int64_t>(i);
  }
  return best;
}

double share_stderr(double p, int64_t n) {
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(p * (1 - p) / static_cast<double>(n - 1));
}

std::vector<ScoredSequence> choice_sequences(const data::Tokenizer& tokenizer,
                                             const ChoiceItem& item, int64_t max_len) {
  std::vector<ScoredSequence> out;
  for (const std::string& choice : item.choices) {
    out.push_back(scored_pair(split_pair(tokenizer, item.context, choice), max_len));
  }
  return out;
}

ChoiceMetrics evaluate_choices(nn::Transformer& model, const data::Tokenizer& tokenizer,
                               const std::vector<ChoiceItem>& items, int64_t batch_size,
                               const std::string& source, const ChoiceProgress& progress,
                               const inference::InferenceModel* inference) {
  EMBER_CHECK(!items.empty(), source, ": no items to evaluate");
  const int64_t max_len = model.config().max_seq_len;
  int64_t correct = 0, correct_norm = 0;
  for (size_t first = 0; first < items.size();) {
    // A group of whole items with at least batch_size sequences (or the rest).
    std::vector<ScoredSequence> group;
    size_t end = first;
    for (; end < items.size() && static_cast<int64_t>(group.size()) < batch_size; ++end) {
      try {
        std::vector<ScoredSequence> seqs = choice_sequences(tokenizer, items[end], max_len);
        group.insert(group.end(), seqs.begin(), seqs.end());
      } catch (const Error& e) {
        throw Error(source + ":" + std::to_string(items[end].line) + ": " + e.what());
      }
    }
    const std::vector<double> scores = score_sequences(model, group, batch_size, inference);
    size_t at = 0;
    for (size_t i = first; i < end; ++i) {
      const ChoiceItem& item = items[i];
      std::vector<double> s(scores.begin() + at, scores.begin() + at + item.choices.size()),
          norm(s);
      for (size_t c = 0; c < s.size(); ++c)
        norm[c] = s[c] / static_cast<double>(utf8_length(item.choices[c]));
      correct += first_argmax(s) == item.gold;
      correct_norm += first_argmax(norm) == item.gold;
      at += item.choices.size();
    }
    first = end;
    if (progress) progress(first, items.size(), static_cast<double>(correct) / first);
  }
  ChoiceMetrics m;
  m.n = items.size();
  m.acc = static_cast<double>(correct) / m.n;
  m.acc_norm = static_cast<double>(correct_norm) / m.n;
  m.acc_stderr = share_stderr(m.acc, m.n);
  m.acc_norm_stderr = share_stderr(m.acc_norm, m.n);
  return m;
}

}  // namespace ember::apps
