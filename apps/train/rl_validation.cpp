// `ember rl`'s validation (docs/cli.md#rl-from-a-reward): the greedy completion of each held-out
// prompt (inference::greedy_completions, --max-tokens at most), scored by the run's reward:
// val_reward is their mean reward; val_exact the share of the prompts with an "answer" whose
// completion's text, without its stop token and surrounding white space, is the answer.
#include "apps/train/rl_run.h"
#include "inference/rollout/rollout.h"

namespace ember::apps {
namespace {

std::string trimmed(const std::string& s) {
  const char* space = " \t\r\n";
  const size_t a = s.find_first_not_of(space);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(space) - a + 1);
}

}  // namespace

std::vector<std::pair<std::string, double>> rl_validation(TrainRun& run) {
  const std::vector<RlItem>& held = run.rl->held_out;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<const RlItem*> items;
  for (const RlItem& item : held) {
    prompts.push_back(item.ids);
    items.push_back(&item);
  }
  std::vector<std::vector<int64_t>> completions;
  for (inference::Completion& c :
       inference::greedy_completions(*run.model, prompts, run.o.max_tokens, run.rl->stop_tokens,
                                     static_cast<int64_t>(run.tokenizer->vocab_size())))
    completions.push_back(std::move(c.tokens));
  const std::vector<double> rewards = rl_rewards(run, items, completions);
  double reward = 0, exact = 0, answered = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    reward += rewards[i];
    if (!held[i].answer) continue;
    answered += 1;
    exact += trimmed(completion_text(run, completions[i])) == *held[i].answer;
  }
  std::vector<std::pair<std::string, double>> out = {
      {"reward", reward / static_cast<double>(held.size())}};
  if (answered > 0) out.emplace_back("exact", exact / answered);
  return out;
}

}  // namespace ember::apps
