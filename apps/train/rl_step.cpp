// One `ember rl` step (docs/model.md#rl-from-a-reward): this rank's --batch-size prompts, G
// completions of each sampled by the serving engine (inference/rollout/rollout.h) from the
// policy as it is, scored (rl_rewards.cpp); the completions as rows prompt + completion in
// chunks of --batch-size rows, each padded after its ids; one pass without a graph in eval mode
// for logp_old (and ppo's V_old) and one for the reference (LoRA: the adapters off; --full: the
// starting model); the advantages (grpo: per group; ppo: GAE, whitened over the step's
// completion tokens of every rank); then --iterations updates, each forward and backward over
// every chunk (the loss over the step's completion-token count N; the reducer averages over the
// W ranks, so each rank's is over N / W) and one optimizer update. --rollouts-out gets the step's
// completions from every rank, in rank order.
#include <cmath>
#include <numeric>

#include "apps/common/stopwatch.h"
#include "apps/train/metrics_log.h"
#include "apps/train/rl_run.h"
#include "apps/train/step_phases.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "inference/rollout/rollout.h"
#include "nn/adapters/lora.h"
#include "nn/alignment/advantages.h"
#include "nn/alignment/completion_logprobs.h"

namespace ember::apps {
namespace {

using nlohmann::json;

// The step's completions on this rank, prompt-major: row i is completion i % G of prompt i / G.
struct Rows {
  std::vector<const RlItem*> items;
  std::vector<std::vector<int64_t>> completions;
  std::vector<double> rewards;
  inference::RolloutStats stats;
};

// A chunk of rows as the model reads them, with what the update needs of each.
struct Chunk {
  std::vector<size_t> rows;
  Tensor x, y, mask;           // [n, T]: inputs, targets, 1 at completion-token targets
  Tensor logp_old, ref;        // [n, T] float64
  Tensor values_old, returns;  // ppo, [n, T] float64
  Tensor advantages;           // grpo [n]; ppo [n, T] (whitened), float64
};

Rows sample(TrainRun& run) {
  const TrainOptions& o = run.o;
  Rows r;
  std::vector<std::vector<int64_t>> prompts;
  std::vector<const RlItem*> prompt_items;
  for (int64_t b = 0; b < o.batch_size; ++b) {
    const RlItem& item = run.rl->train[static_cast<size_t>(rl_prompt_at(run, run.step, b))];
    prompts.push_back(item.ids);
    prompt_items.push_back(&item);
  }
  inference::RolloutOptions ro;
  ro.group_size = o.group_size;
  ro.temperature = o.temperature;
  ro.max_tokens = o.max_tokens;
  ro.stop_tokens = run.rl->stop_tokens;
  ro.seed = o.seed;
  ro.vocab_limit = static_cast<int64_t>(run.tokenizer->vocab_size());  // ids it can decode
  ro.prompt_offset = (run.step * run.data_world + run.data_rank) * o.batch_size;
  inference::Rollout out = inference::rollout(*run.model, prompts, ro);
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (inference::Completion& c : out.groups[p]) {
      r.items.push_back(prompt_items[p]);
      r.completions.push_back(std::move(c.tokens));
    }
  }
  r.stats = out.stats;
  return r;
}

// Rows [first, first + n) as a chunk: ids = prompt + completion, inputs ids[:-1], targets ids[1:].
Chunk make_chunk(const Rows& r, size_t first, size_t n) {
  Chunk c;
  int64_t T = 0;
  for (size_t i = first; i < first + n; ++i) {
    c.rows.push_back(i);
    T = std::max<int64_t>(
        T, static_cast<int64_t>(r.items[i]->ids.size() + r.completions[i].size()) - 1);
  }
  const int64_t rows = static_cast<int64_t>(n);
  c.x = Tensor::zeros({rows, T}, DType::Int64);
  c.y = Tensor::zeros({rows, T}, DType::Int64);
  c.mask = Tensor::zeros({rows, T}, DType::Float32);
  for (int64_t b = 0; b < rows; ++b) {
    const size_t i = first + static_cast<size_t>(b);
    std::vector<int64_t> ids = r.items[i]->ids;
    const int64_t P = static_cast<int64_t>(ids.size());
    ids.insert(ids.end(), r.completions[i].begin(), r.completions[i].end());
    for (int64_t t = 0; t + 1 < static_cast<int64_t>(ids.size()); ++t) {
      c.x.data<int64_t>()[b * T + t] = ids[static_cast<size_t>(t)];
      c.y.data<int64_t>()[b * T + t] = ids[static_cast<size_t>(t + 1)];
      c.mask.data<float>()[b * T + t] = t + 1 >= P ? 1.0f : 0.0f;
    }
  }
  return c;
}

// logp_old (and V_old) under the policy, ref under the reference: eval mode, no graph.
void old_and_reference(TrainRun& run, Chunk& c) {
  NoGradGuard no_grad;
  AutocastGuard mixed(run.autocast);
  const double tau = run.o.temperature;
  const auto logps = [&](const Variable& logits) {
    return nn::completion_logprobs(logits, c.y, c.mask, tau).data().to(DType::Float64);
  };
  nn::Transformer& model = *run.model;
  const bool training = model.is_training();
  model.eval();
  if (model.has_value_head()) {
    const nn::Transformer::PolicyOutput out = model.forward_with_values(c.x);
    c.logp_old = logps(out.logits);
    c.values_old = out.values.data().to(DType::Float64);
  } else {
    c.logp_old = logps(model.forward(c.x).logits);
  }
  if (run.rl->reference) {
    c.ref = logps(run.rl->reference->forward(c.x).logits);
  } else {
    const nn::AdaptersOffGuard base_only;  // LoRA: the base itself
    c.ref = logps(model.forward(c.x).logits);
  }
  model.train(training);
}

// grpo: each row's group-normalised reward; ppo: GAE over V_old, whitened over the completion
// tokens of every chunk and rank.
void advantages(TrainRun& run, const Rows& r, std::vector<Chunk>& chunks) {
  const TrainOptions& o = run.o;
  if (run.rl->loss.algo == nn::RlAlgo::Grpo) {
    const int64_t n = static_cast<int64_t>(r.rewards.size());
    Tensor rewards = Tensor::zeros({n}, DType::Float64);
    std::copy(r.rewards.begin(), r.rewards.end(), rewards.data<double>());
    const Tensor a = nn::grpo_advantages(rewards, o.group_size);
    for (Chunk& c : chunks)
      c.advantages =
          a.narrow(0, static_cast<int64_t>(c.rows.front()), static_cast<int64_t>(c.rows.size()))
              .contiguous();
    return;
  }
  nn::MomentSums step;
  std::vector<Tensor> raw;
  for (Chunk& c : chunks) {
    Tensor scores = Tensor::zeros({static_cast<int64_t>(c.rows.size())}, DType::Float64);
    for (size_t i = 0; i < c.rows.size(); ++i) scores.data<double>()[i] = r.rewards[c.rows[i]];
    const Tensor rewards = nn::ppo_token_rewards(scores, c.logp_old, c.ref, c.mask, o.kl);
    const nn::Gae g = nn::gae(rewards, c.values_old, c.mask);
    c.returns = g.returns;
    raw.push_back(g.advantages);
    step += nn::moment_sums(g.advantages, c.mask);
  }
  if (run.world > 1) {
    const std::vector<double> s = run.comm.all_reduce(
        std::vector<double>{step.n, step.sum, step.sum_sq}, dist::ReduceOp::Sum);
    step = {s[0], s[1], s[2]};
  }
  for (size_t k = 0; k < chunks.size(); ++k)
    chunks[k].advantages = nn::whiten(raw[k], chunks[k].mask, step);
}

// One update's forward and backward over every chunk: this rank's metric sums.
nn::RlMetrics forward_backward(TrainRun& run, std::vector<Chunk>& chunks, double norm) {
  dist::Reducer* reducer = run.optimization.reducer.get();
  const nn::RlOptions& opt = run.rl->loss;
  nn::RlMetrics sums;
  AutocastGuard mixed(run.autocast);
  for (size_t k = 0; k < chunks.size(); ++k) {
    Chunk& c = chunks[k];
    if (reducer) reducer->set_sync(k + 1 == chunks.size());
    nn::RlLossResult l;
    {
      EMBER_PROFILE_PHASE(kForwardPhase);
      if (opt.algo == nn::RlAlgo::Ppo) {
        const nn::Transformer::PolicyOutput out = run.model->forward_with_values(c.x);
        const nn::PolicyTokens t{
            nn::completion_logprobs(out.logits, c.y, c.mask, run.o.temperature), c.logp_old, c.ref,
            c.mask};
        l = nn::ppo_loss(t, c.advantages, nn::ValueTokens{out.values, c.values_old, c.returns}, opt,
                         norm);
      } else {
        const Variable logits = run.model->forward(c.x).logits;
        const nn::PolicyTokens t{nn::completion_logprobs(logits, c.y, c.mask, run.o.temperature),
                                 c.logp_old, c.ref, c.mask};
        l = nn::grpo_loss(t, c.advantages, opt, norm);
      }
    }
    {
      EMBER_PROFILE_PHASE(kBackwardPhase);
      l.loss.backward();
    }
    sums += l.sums;
  }
  if (reducer) {
    EMBER_PROFILE_PHASE(kCommWaitPhase);
    reducer->finish();
  }
  return sums;
}

nn::RlMetrics global_sums(const TrainRun& run, nn::RlMetrics m) {
  if (run.world <= 1) return m;
  const std::vector<double> s = run.comm.all_reduce(
      std::vector<double>{m.loss, m.value_loss, m.kl, m.clipped, m.tokens}, dist::ReduceOp::Sum);
  m.loss = s[0], m.value_loss = s[1], m.kl = s[2], m.clipped = s[3], m.tokens = s[4];
  return m;
}

// The step's scores over every rank: mean and unbiased standard deviation; and the completions'
// mean length.
void score_metrics(const TrainRun& run, const Rows& r, StepResult& s) {
  double n = 0, sum = 0, sum_sq = 0, tokens = 0;
  for (size_t i = 0; i < r.rewards.size(); ++i) {
    n += 1, sum += r.rewards[i], sum_sq += r.rewards[i] * r.rewards[i];
    tokens += static_cast<double>(r.completions[i].size());
  }
  if (run.world > 1) {
    const std::vector<double> t =
        run.comm.all_reduce(std::vector<double>{n, sum, sum_sq, tokens}, dist::ReduceOp::Sum);
    n = t[0], sum = t[1], sum_sq = t[2], tokens = t[3];
  }
  const double mean = sum / n;
  s.metrics.emplace_back("reward", mean);
  s.metrics.emplace_back("reward_std",
                         n > 1 ? std::sqrt(std::max(0.0, (sum_sq - sum * mean) / (n - 1))) : 0.0);
  s.metrics.emplace_back("completion_length", tokens / n);
}

// --rollouts-out: this rank's lines, then rank 0 appends every rank's in rank order.
void write_rollouts(TrainRun& run, const Rows& r, const std::vector<Chunk>& chunks) {
  if (run.rl->rollouts_out.empty()) return;
  std::string lines;
  for (const Chunk& c : chunks) {
    const int64_t T = c.mask.size(1);
    for (size_t k = 0; k < c.rows.size(); ++k) {
      const size_t i = c.rows[k];
      const int64_t P = static_cast<int64_t>(r.items[i]->ids.size());
      const int64_t L = static_cast<int64_t>(r.completions[i].size());
      std::vector<double> logp_old, advantage;
      for (int64_t t = P - 1; t < P - 1 + L; ++t) {
        logp_old.push_back(c.logp_old.data<double>()[static_cast<int64_t>(k) * T + t]);
        if (c.advantages.dim() == 2)
          advantage.push_back(c.advantages.data<double>()[static_cast<int64_t>(k) * T + t]);
      }
      json j = {{"step", run.step + 1},
                {"prompt", r.items[i]->index},
                {"prompt_ids", r.items[i]->ids},
                {"completion_ids", r.completions[i]},
                {"reward", r.rewards[i]}};
      if (c.advantages.dim() == 2) {
        j["advantage"] = advantage;
      } else {
        j["advantage"] = c.advantages.data<double>()[k];
      }
      j["logp_old"] = logp_old;
      lines += j.dump() + "\n";
    }
  }
  std::string all;
  for (int rank = 0; rank < run.world; ++rank) {
    std::string part = run.comm.rank() == rank ? lines : std::string();
    if (run.world > 1) run.comm.broadcast(part, rank);
    all += part;
  }
  if (!run.root) return;
  MetricsLog file(run.rl->rollouts_out);
  if (!all.empty()) file.append(all.substr(0, all.size() - 1));
}

}  // namespace

void rl_step(TrainRun& run, StepResult& s, const std::function<void(StepResult&)>& update) {
  const TrainOptions& o = run.o;
  const Stopwatch rollout_clock;
  Rows r = sample(run);
  const double rollout_s = rollout_clock.seconds();
  const Stopwatch score_clock;
  r.rewards = rl_rewards(run, r.items, r.completions);
  const double score_s = score_clock.seconds();
  const Stopwatch update_clock;
  std::vector<Chunk> chunks;
  for (size_t first = 0; first < r.completions.size(); first += static_cast<size_t>(o.batch_size)) {
    chunks.push_back(make_chunk(
        r, first, std::min(r.completions.size() - first, static_cast<size_t>(o.batch_size))));
    old_and_reference(run, chunks.back());
  }
  advantages(run, r, chunks);
  double tokens = 0;  // the completion tokens: the mask's ones
  for (const std::vector<int64_t>& c : r.completions) tokens += static_cast<double>(c.size());
  if (run.world > 1) tokens = run.comm.all_reduce(tokens, dist::ReduceOp::Sum);
  const double norm = tokens / static_cast<double>(run.data_world);  // this rank's share of N
  nn::RlMetrics total;
  double norm_sum = 0;
  for (int64_t it = 0; it < o.iterations; ++it) {
    StepResult u;
    u.lr = s.lr;
    run.optimization.optimizer->zero_grad();
    total += global_sums(run, forward_backward(run, chunks, norm));
    u.ce = total.loss / total.tokens;  // checked finite by the update
    update(u);
    norm_sum += u.norm;
    s.grad_scale = u.grad_scale;
  }
  const double update_s = update_clock.seconds();
  s.norm = norm_sum / static_cast<double>(o.iterations);  // the iterations' mean
  score_metrics(run, r, s);
  for (const auto& [key, value] : total.means()) s.metrics.emplace_back(key, value);
  s.ce = total.loss / total.tokens;
  s.metrics.emplace_back("rollout_ms", rollout_s * 1e3);
  s.metrics.emplace_back("score_ms", score_s * 1e3);
  s.metrics.emplace_back("update_ms", update_s * 1e3);
  s.metrics.emplace_back("prefilled_tokens", static_cast<double>(r.stats.prefilled_tokens));
  run.tokens_per_step = static_cast<int64_t>(tokens);
  write_rollouts(run, r, chunks);
}

}  // namespace ember::apps
