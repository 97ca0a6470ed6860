// The rewards of `ember rl` (docs/model.md#rl-from-a-reward): --reward match is 1 when the
// completion's text (its stop token left out) contains the prompt's "answer", else 0;
// --reward-model scores prompt then completion as `ember reward` scores a pair's side: the
// prompt and the completion's text rendered by data::render_preference_side with the reward
// model's tokenizer (ChatML, or text then <|endoftext|>), read at its last position
// (apps/common/side_scores.h), in eval mode without a graph.
#include <algorithm>

#include "apps/common/side_scores.h"
#include "apps/train/rl_run.h"
#include "data/preference_pairs.h"

namespace ember::apps {
namespace {

// The reward model's side for prompt then completion text.
std::vector<uint32_t> reward_side(const TrainRun& run, const RlItem& item,
                                  const std::string& text) {
  data::PreferenceLine line;
  line.is_text = item.source.is_text;
  line.prompt = item.source.messages;
  line.prompt_text = item.source.text;
  const int64_t T = run.rl->reward_model->config().max_seq_len;
  return data::render_preference_side(*run.rl->reward_tokenizer, line, text, T).ids;
}

}  // namespace

std::string completion_text(const TrainRun& run, const std::vector<int64_t>& completion) {
  const std::vector<int64_t>& stops = run.rl->stop_tokens;
  size_t n = completion.size();
  if (n > 0 && std::find(stops.begin(), stops.end(), completion.back()) != stops.end()) --n;
  std::vector<uint32_t> ids(completion.begin(),
                            completion.begin() + static_cast<std::ptrdiff_t>(n));
  return run.tokenizer->decode(ids);
}

std::vector<double> rl_rewards(const TrainRun& run, const std::vector<const RlItem*>& items,
                               const std::vector<std::vector<int64_t>>& completions) {
  EMBER_CHECK(items.size() == completions.size(), "rl_rewards: ", items.size(), " prompts for ",
              completions.size(), " completions");
  std::vector<double> out(completions.size());
  if (!run.rl->reward_model) {
    for (size_t i = 0; i < completions.size(); ++i)
      out[i] = completion_text(run, completions[i]).find(*items[i]->answer) != std::string::npos;
    return out;
  }
  std::vector<std::vector<uint32_t>> sides;
  for (size_t i = 0; i < completions.size(); ++i)
    sides.push_back(reward_side(run, *items[i], completion_text(run, completions[i])));
  const std::vector<float> scores = score_sides(*run.rl->reward_model, sides, run.o.batch_size);
  std::copy(scores.begin(), scores.end(), out.begin());
  return out;
}

}  // namespace ember::apps
