// greedy_completions(): every prompt submitted at once to one Engine over the policy (temperature
// 0: the sampler's argmax), stepped on the caller's thread until each has finished.
#include <memory>

#include "autograd/grad_mode.h"
#include "inference/engine/engine.h"
#include "inference/rollout/rollout.h"

namespace ember::inference {

std::vector<Completion> greedy_completions(const nn::Transformer& policy,
                                           const std::vector<std::vector<int64_t>>& prompts,
                                           int64_t max_tokens,
                                           const std::vector<int64_t>& stop_tokens,
                                           int64_t vocab_limit) {
  RolloutOptions check;
  check.group_size = 2;  // not used: the checks of the prompts and max_tokens
  check.max_tokens = max_tokens;
  check.stop_tokens = stop_tokens;
  check_rollout(policy.config(), prompts, check);
  NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(prompts.size());
  EngineOptions eo;
  eo.max_seqs = std::min<int64_t>(n, 64);
  eo.max_queue = n;
  eo.max_batch_tokens = 512;
  eo.kv_blocks = 0;  // enough for max_seqs full contexts
  Engine engine(std::make_shared<const InferenceModel>(policy), eo);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const std::vector<int64_t>& prompt : prompts) {
    EngineRequest req;
    req.prompt = prompt;
    req.sampling.max_tokens = max_tokens;
    req.sampling.temperature = 0;
    req.sampling.vocab_limit = vocab_limit;
    req.stop_tokens = stop_tokens;
    req.output_stop_token = true;
    handles.push_back(engine.submit(std::move(req)));
  }
  std::vector<Completion> out(static_cast<size_t>(n));
  std::vector<char> done(static_cast<size_t>(n), 0);
  int64_t open = n;
  while (open > 0) {
    const bool ran = engine.step();
    bool any = false;
    for (size_t i = 0; i < handles.size(); ++i) {
      while (!done[i]) {
        std::optional<EngineEvent> ev = handles[i]->next(std::chrono::milliseconds(0));
        if (!ev) break;
        any = true;
        out[i].tokens.insert(out[i].tokens.end(), ev->tokens.begin(), ev->tokens.end());
        if (!ev->finished) continue;
        EMBER_CHECK(ev->reason != FinishReason::Cancelled,
                    "greedy_completions: the engine cancelled a completion");
        out[i].stopped = ev->reason == FinishReason::Stop;
        done[i] = 1;
        --open;
      }
    }
    EMBER_CHECK(ran || any, "greedy_completions: the engine stopped with ", open,
                " completions unfinished");
  }
  return out;
}

}  // namespace ember::inference
