// rollout(): one Engine over an InferenceModel of the policy, stepped on the caller's thread.
// Each prompt's first completion is submitted at once; when its first event arrives its
// prompt is computed and its G - 1 siblings are submitted with share_prompt_with: they take
// its KV blocks (the partial last one copied) and compute only the prompt's last token (or,
// had it finished already, take its full blocks from the prefix cache). Every completion of
// the call decodes in the same continuous batch and a prompt is prefilled once.
#include "inference/rollout/rollout.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "autograd/grad_mode.h"
#include "inference/engine/engine.h"

namespace ember::inference {
namespace {

// splitmix64's output for the state x.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int64_t blocks_for(int64_t positions) {
  return (positions + kKVBlockSize - 1) / kKVBlockSize;
}

// KV blocks for every completion at once: a prompt's shared full blocks (those the prefix
// cache can hand out: inside its first P - 1 tokens) once, the rest G times; with max_seqs,
// the shared blocks and max_seqs completions' own blocks.
int64_t blocks_needed(const std::vector<std::vector<int64_t>>& prompts, const RolloutOptions& opt,
                      int64_t max_seqs) {
  int64_t shared = 0, own = 0, own_max = 0;
  for (const std::vector<int64_t>& prompt : prompts) {
    const int64_t P = static_cast<int64_t>(prompt.size());
    const int64_t s = (P - 1) / kKVBlockSize, o = blocks_for(P + opt.max_tokens - 1) - s;
    shared += s;
    own += opt.group_size * o;
    own_max = std::max(own_max, o);
  }
  return shared + std::min(own, max_seqs * own_max);
}

EngineOptions engine_options(const std::vector<std::vector<int64_t>>& prompts,
                             const RolloutOptions& opt) {
  const int64_t total = static_cast<int64_t>(prompts.size()) * opt.group_size;
  EngineOptions eo;
  eo.max_seqs = opt.max_seqs > 0 ? std::min(opt.max_seqs, total) : total;
  eo.kv_blocks = blocks_needed(prompts, opt, eo.max_seqs);
  eo.max_batch_tokens = opt.max_batch_tokens;
  eo.max_queue = total;
  eo.prefix_cache = true;
  return eo;
}

// One call's requests and what has come back of them.
struct Run {
  const std::vector<std::vector<int64_t>>& prompts;
  const RolloutOptions& opt;
  Engine& engine;
  Rollout out;
  std::vector<std::shared_ptr<RequestHandle>> handles;  // [p * G + g]; null until submitted
  std::vector<char> done;
  int64_t open = 0;  // completions not finished

  void submit(int64_t p, int64_t g) {
    EngineRequest req;
    if (g > 0) req.share_prompt_with = handles[static_cast<size_t>(p * opt.group_size)]->id();
    req.prompt = prompts[static_cast<size_t>(p)];
    req.sampling.max_tokens = opt.max_tokens;
    req.sampling.temperature = opt.temperature;
    req.sampling.seed = completion_seed(opt.seed, opt.prompt_offset + p, g);
    req.sampling.vocab_limit = opt.vocab_limit;
    req.stop_tokens = opt.stop_tokens;
    req.logprobs = 0;
    req.logprobs_at_temperature = true;
    req.output_stop_token = true;
    out.stats.prompt_tokens += static_cast<int64_t>(req.prompt.size());
    handles[static_cast<size_t>(p * opt.group_size + g)] = engine.submit(std::move(req));
  }

  // Takes the events of completion i; true when there were any.
  bool poll(size_t i) {
    const int64_t G = opt.group_size;
    const int64_t p = static_cast<int64_t>(i) / G, g = static_cast<int64_t>(i) % G;
    Completion& c = out.groups[static_cast<size_t>(p)][static_cast<size_t>(g)];
    bool any = false;
    while (std::optional<EngineEvent> ev = handles[i]->next(std::chrono::milliseconds(0))) {
      if (c.tokens.empty()) out.stats.cached_prompt_tokens += ev->cached_prompt_tokens;
      any = true;
      EMBER_CHECK(ev->logprobs.size() == ev->tokens.size(), "rollout: an event lacks logprobs");
      c.tokens.insert(c.tokens.end(), ev->tokens.begin(), ev->tokens.end());
      for (const TokenLogprob& lp : ev->logprobs) c.logprobs.push_back(lp.logprob);
      if (g == 0 && !handles[i + 1]) {  // the prompt is in the cache: its siblings follow
        for (int64_t k = 1; k < G; ++k) submit(p, k);
      }
      if (!ev->finished) continue;
      EMBER_CHECK(ev->reason != FinishReason::Cancelled,
                  "rollout: the engine cancelled a completion");
      c.stopped = ev->reason == FinishReason::Stop;
      done[i] = 1;
      --open;
      break;
    }
    return any;
  }
};

}  // namespace

uint64_t completion_seed(uint64_t seed, int64_t prompt, int64_t completion) {
  return mix(mix(mix(seed) + static_cast<uint64_t>(prompt)) + static_cast<uint64_t>(completion));
}

void check_rollout(const nn::ModelConfig& cfg, const std::vector<std::vector<int64_t>>& prompts,
                   const RolloutOptions& opt) {
  const int64_t L = cfg.max_seq_len, M = opt.max_tokens, V = cfg.vocab_size;
  EMBER_CHECK(opt.group_size >= 2, "rollout: the group size must be >= 2 (a prompt's completions ",
              "are compared with each other), got ", opt.group_size);
  EMBER_CHECK(opt.temperature > 0 && std::isfinite(opt.temperature),
              "rollout: the temperature must be > 0 (logp_old is of logits / temperature), got ",
              opt.temperature);
  EMBER_CHECK(M >= 1, "rollout: max_tokens must be >= 1, got ", M);
  EMBER_CHECK(opt.max_seqs >= 0, "rollout: max_seqs must be >= 0 (0: all at once), got ",
              opt.max_seqs);
  EMBER_CHECK(!prompts.empty(), "rollout: no prompts");
  for (const int64_t t : opt.stop_tokens) {
    EMBER_CHECK(t >= 0 && t < V, "rollout: stop token ", t, " is outside the model's vocab of ", V);
  }
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int64_t P = static_cast<int64_t>(prompts[p].size());
    EMBER_CHECK(P > 0, "rollout: prompt ", p, " is empty; it needs at least one token");
    for (const int64_t t : prompts[p]) {
      EMBER_CHECK(t >= 0 && t < V, "rollout: prompt ", p, " holds token ", t,
                  ", outside the model's vocab of ", V);
    }
    EMBER_CHECK(M <= L && P <= L - M, "rollout: prompt ", p, " has ", P,
                " tokens; with max_tokens ", M,
                " prompt and completion exceed the model's max_seq_len of ", L,
                ": shorten the prompt or lower max_tokens");
  }
}

Rollout rollout(const nn::Transformer& policy, const std::vector<std::vector<int64_t>>& prompts,
                const RolloutOptions& opt) {
  check_rollout(policy.config(), prompts, opt);
  NoGradGuard no_grad;
  Engine engine(std::make_shared<const InferenceModel>(policy), engine_options(prompts, opt));
  const size_t n = prompts.size(), G = static_cast<size_t>(opt.group_size);
  Run run{prompts, opt, engine, {}, std::vector<std::shared_ptr<RequestHandle>>(n * G),
          std::vector<char>(n * G, 0), static_cast<int64_t>(n * G)};
  run.out.groups.assign(n, std::vector<Completion>(G));
  for (size_t p = 0; p < n; ++p) run.submit(static_cast<int64_t>(p), 0);
  while (run.open > 0) {
    const bool ran = engine.step();
    bool any = false;
    for (size_t i = 0; i < n * G; ++i) {
      if (run.handles[i] && !run.done[i]) any = run.poll(i) || any;
    }
    EMBER_CHECK(ran || any, "rollout: the engine stopped with ", run.open,
                " completions unfinished");
  }
  const EngineStats st = engine.stats();
  RolloutStats& s = run.out.stats;
  s.prefilled_tokens = s.prompt_tokens - s.cached_prompt_tokens;
  s.generated_tokens = static_cast<int64_t>(st.generation_tokens);
  s.steps = static_cast<int64_t>(st.steps);
  return std::move(run.out);
}

}  // namespace ember::inference
