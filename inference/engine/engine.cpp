// The engine: submit() validates and queues, step() plans with the Scheduler,
// runs one InferenceModel::forward over every chunk outside the lock, then draws
// each finished chunk's next token with the request's own TokenSampler (draw i
// uses counter i whatever the batch; the draws of a step run in parallel, one
// request per thread at a time, so a draw never depends on the batch either)
// and pushes events to the handles in plan order.
// start() runs step() on a thread that sleeps on a condition variable when idle.
#include "inference/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include <omp.h>

#include "autograd/grad_mode.h"
#include "inference/kv_cache/block_manager.h"
#include "inference/sample/logprobs.h"
#include "inference/scheduler/scheduler.h"

namespace ember::inference {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

Histogram make_histogram(std::vector<double> bounds) {
  Histogram h;
  h.bounds = std::move(bounds);
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

EngineOptions resolve(EngineOptions opt, const nn::ModelConfig& cfg) {
  EMBER_CHECK(opt.max_seqs > 0, "engine: max_seqs must be > 0, got ", opt.max_seqs);
  EMBER_CHECK(opt.max_batch_tokens > 0, "engine: max_batch_tokens must be > 0, got ",
              opt.max_batch_tokens);
  EMBER_CHECK(opt.max_queue >= 0, "engine: max_queue must be >= 0, got ", opt.max_queue);
  EMBER_CHECK(opt.kv_blocks >= 0, "engine: kv_blocks must be >= 0, got ", opt.kv_blocks);
  const int64_t per_context = (cfg.max_seq_len + kKVBlockSize - 1) / kKVBlockSize;
  if (opt.kv_blocks == 0 && opt.kv_memory_bytes > 0) {
    const size_t block = PagedKVStore::bytes_per_block(cfg, opt.kv_dtype);
    opt.kv_blocks = static_cast<int64_t>(opt.kv_memory_bytes / block);
    EMBER_CHECK(opt.kv_blocks > 0, "engine: kv memory of ", opt.kv_memory_bytes,
                " bytes holds no block of ", block, " bytes");
  }
  if (opt.kv_blocks == 0) opt.kv_blocks = opt.max_seqs * per_context;
  return opt;
}

// One request's engine-side state (the Sequence itself lives in the Scheduler).
struct Request {
  EngineRequest req;
  std::shared_ptr<RequestHandle> handle;
  TokenSampler sampler;
  Clock::time_point submitted, last_token;
  int64_t n_output = 0;
  std::vector<TokenLogprob> prompt_logprobs;  // position p scores prompt token p
  bool first_sent = false;
};

// A chunk's draw, computed before the events: the token and its log-probability.
struct Draw {
  int64_t token = -1;
  TokenLogprob logprob;
};

}  // namespace

struct Engine::Impl {
  std::shared_ptr<const InferenceModel> model;
  EngineOptions opt;
  PagedKVStore kv;
  BlockManager blocks;
  Scheduler sched;

  std::mutex step_mu;     // one step at a time
  mutable std::mutex mu;  // everything below, the scheduler and the block manager
  std::condition_variable cv;
  std::map<int64_t, Request> requests;
  int64_t next_id = 1;
  bool accepting = true, cancel_all = false, stop_thread = false;
  std::thread thread;
  EngineStats stats;

  Impl(std::shared_ptr<const InferenceModel> m, const EngineOptions& o)
      : model(std::move(m)),
        opt(resolve(o, model->config())),
        kv(model->config(), opt.kv_blocks, opt.kv_dtype),
        blocks(opt.kv_blocks, opt.prefix_cache),
        sched(blocks,
              {opt.max_seqs, opt.max_batch_tokens, opt.max_queue, opt.max_prefill_with_decodes}) {
    stats.ttft_seconds = make_histogram(
        {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 30, 60});
    stats.itl_seconds = make_histogram(
        {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  }

  void check_request(const EngineRequest& r) const;
  bool step();
  void reap_cancelled();
  void process(const ScheduledChunk& c, const Tensor& logits, int64_t row0, const Draw& d);
  void draw(Request& r, Sequence& s, const Draw& d);
  std::vector<Draw> draw_all(const std::vector<ScheduledChunk>& plan, const std::vector<int64_t>& row0,
                             const Tensor& logits);
  EngineEvent event_for(Request& r, const Sequence* s);
  void finish(int64_t id, EngineEvent ev, FinishReason reason);
  void run();
};

void Engine::Impl::check_request(const EngineRequest& r) const {
  const nn::ModelConfig& cfg = model->config();
  const int64_t P = static_cast<int64_t>(r.prompt.size()), L = cfg.max_seq_len;
  EMBER_CHECK(P > 0, "engine: the prompt is empty; it needs at least one token");
  for (const int64_t t : r.prompt) {
    EMBER_CHECK(t >= 0 && t < cfg.vocab_size, "engine: prompt token ", t,
                " is outside the model's vocab of ", cfg.vocab_size);
  }
  check_sampling_options(r.sampling);
  EMBER_CHECK(r.logprobs >= -1 && r.logprobs <= 5, "engine: logprobs must be in [-1, 5], got ",
              r.logprobs);
  // The last output token is drawn, never fed back: P + max_tokens - 1 positions at most
  // (compared without forming the sum, which a huge max_tokens would overflow).
  EMBER_CHECK(P <= L && r.sampling.max_tokens <= L - P + 1, "engine: the prompt's ", P,
              " tokens and max_tokens ", r.sampling.max_tokens,
              " exceed the model's max_seq_len of ", L);
  const int64_t positions = std::max(P, P + r.sampling.max_tokens - 1);
  const int64_t need = (positions + kKVBlockSize - 1) / kKVBlockSize;
  EMBER_CHECK(need <= opt.kv_blocks, "engine: the request needs ", need,
              " KV blocks, more than the cache's ", opt.kv_blocks);
}

EngineEvent Engine::Impl::event_for(Request& r, const Sequence* s) {
  EngineEvent ev;
  ev.prompt_tokens = static_cast<int64_t>(r.req.prompt.size());
  ev.cached_prompt_tokens = s ? s->cached_prompt_tokens : 0;
  if (!r.first_sent) {
    r.first_sent = true;
    if (r.req.prompt_logprobs) ev.prompt_logprobs = std::move(r.prompt_logprobs);
  }
  return ev;
}

void Engine::Impl::finish(int64_t id, EngineEvent ev, FinishReason reason) {
  const std::shared_ptr<RequestHandle> handle = requests.at(id).handle;
  sched.remove(id);  // blocks freed before the caller hears of the end
  requests.erase(id);
  ++stats.finished[finish_reason_name(reason)];
  ev.finished = true;
  ev.reason = reason;
  handle->push(std::move(ev));
}

void Engine::Impl::reap_cancelled() {
  std::vector<int64_t> ids;
  for (const auto& [id, r] : requests) {
    if (cancel_all || r.handle->cancel_requested()) ids.push_back(id);
  }
  for (const int64_t id : ids) {
    Request& r = requests.at(id);
    const Sequence* s = nullptr;
    for (const auto& q : sched.running()) s = q->id == id ? q.get() : s;
    finish(id, event_for(r, s), FinishReason::Cancelled);
  }
}

}  // namespace ember::inference

namespace ember::inference {

namespace {
// Whether chunk c ends its sequence's computed tokens with a token to draw.
bool draws(const ScheduledChunk& c, const Request& r) {
  return c.samples && r.n_output < r.req.sampling.max_tokens;
}
}  // namespace

// The draws of a step's chunks (in plan order; chunks that draw nothing keep token -1): each
// request's sampler on its own row, the requests split over threads. A failed draw (NaN
// logits) is rethrown after the loop, the first in plan order.
// row0[i]: chunk i's first row of logits.
std::vector<Draw> Engine::Impl::draw_all(const std::vector<ScheduledChunk>& plan,
                                         const std::vector<int64_t>& row0, const Tensor& logits) {
  const int64_t n = static_cast<int64_t>(plan.size()), V = logits.size(1);
  std::vector<Draw> out(plan.size());
  std::vector<Request*> reqs(plan.size(), nullptr);
  std::vector<int64_t> rows(plan.size());  // the row each draw reads: its chunk's last
  int64_t n_draws = 0;
  for (int64_t i = 0; i < n; ++i) {
    const ScheduledChunk& c = plan[i];
    Request& r = requests.at(c.seq->id);
    rows[i] = row0[i] + (c.all_logits ? c.n - 1 : 0);
    if (!draws(c, r)) continue;
    reqs[i] = &r;
    ++n_draws;
  }
  std::vector<std::exception_ptr> failed(plan.size());
#pragma omp parallel for schedule(dynamic, 1) if (n_draws * V >= (int64_t{1} << 14) && !omp_in_parallel())
  for (int64_t i = 0; i < n; ++i) {
    Request* r = reqs[i];
    if (!r) continue;
    try {
      Draw& d = out[i];
      d.token = r->sampler.sample(logits.select(0, rows[i]), plan[i].seq->tokens);
      if (r->req.logprobs >= 0) {
        const double t = r->req.sampling.temperature;
        d.logprob = token_logprob(logits.data<float>() + rows[i] * V, V, d.token, r->req.logprobs,
                                  r->req.logprobs_at_temperature && t > 0 ? t : 1);
      }
    } catch (...) {
      failed[i] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : failed) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

// Ends a draw: the token d.token of a sequence whose tokens are all computed.
void Engine::Impl::draw(Request& r, Sequence& s, const Draw& d) {
  const int64_t tok = d.token;
  const Clock::time_point now = Clock::now();
  EngineEvent ev = event_for(r, &s);
  const auto add_token = [&] {
    ev.tokens.push_back(tok);
    if (r.req.logprobs >= 0) ev.logprobs.push_back(d.logprob);
  };
  const std::vector<int64_t>& stops = r.req.stop_tokens;
  if (tok == r.req.sampling.stop_token ||
      std::find(stops.begin(), stops.end(), tok) != stops.end()) {
    if (r.req.output_stop_token) {
      add_token();
      ++stats.generation_tokens;
    }
    finish(s.id, std::move(ev), FinishReason::Stop);
    return;
  }
  s.tokens.push_back(tok);
  ++r.n_output;
  ++stats.generation_tokens;
  if (r.n_output == 1) {
    stats.ttft_seconds.observe(seconds(now - r.submitted));
  } else {
    stats.itl_seconds.observe(seconds(now - r.last_token));
  }
  r.last_token = now;
  add_token();
  if (r.n_output >= r.req.sampling.max_tokens || s.n_computed >= model->config().max_seq_len) {
    finish(s.id, std::move(ev), FinishReason::Length);
  } else {
    r.handle->push(std::move(ev));
  }
}

// A computed chunk: prompt log-probabilities from its rows, then a draw when it ends the tokens.
void Engine::Impl::process(const ScheduledChunk& c, const Tensor& logits, int64_t row0, const Draw& d) {
  Sequence& s = *c.seq;
  Request& r = requests.at(s.id);
  const int64_t V = logits.size(1), top = std::max<int64_t>(r.req.logprobs, 0);
  for (int64_t j = 0; c.all_logits && j < c.n; ++j) {
    const int64_t next = c.pos0 + j + 1;  // the prompt token row j predicts
    if (next < s.prompt_len && static_cast<int64_t>(r.prompt_logprobs.size()) == next) {
      r.prompt_logprobs.push_back(
          token_logprob(logits.data<float>() + (row0 + j) * V, V, s.tokens[next], top));
    }
  }
  if (!c.samples) return;
  if (r.n_output >= r.req.sampling.max_tokens) {  // max_tokens 0: the prompt scored, nothing drawn
    finish(s.id, event_for(r, &s), FinishReason::Length);
    return;
  }
  draw(r, s, d);
}

bool Engine::Impl::step() {
  NoGradGuard no_grad;
  std::vector<ScheduledChunk> plan;
  std::vector<SeqChunk> chunks;
  {
    std::lock_guard<std::mutex> lock(mu);
    reap_cancelled();
    plan = sched.schedule();
    if (plan.empty()) return false;
    for (const auto& [src, dst] : sched.take_copies()) kv.copy_block(src, dst);
    for (const ScheduledChunk& c : plan) {
      chunks.push_back({c.seq->tokens.data() + c.pos0, c.n, c.pos0, &c.seq->blocks, c.all_logits});
    }
  }
  const Tensor logits = model->forward(chunks, kv).contiguous();
  {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.steps;
    std::vector<int64_t> row0(plan.size());  // chunk i's first row of logits
    for (size_t i = 1; i < plan.size(); ++i) row0[i] = row0[i - 1] + (plan[i - 1].all_logits ? plan[i - 1].n : 1);
    const std::vector<Draw> drawn = draw_all(plan, row0, logits);
    for (size_t i = 0; i < plan.size(); ++i) {
      sched.complete(plan[i]);
      process(plan[i], logits, row0[i], drawn[i]);
    }
  }
  cv.notify_all();
  return true;
}

void Engine::Impl::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stop_thread || !requests.empty(); });
      if (stop_thread && requests.empty()) return;
    }
    std::lock_guard<std::mutex> one_step(step_mu);
    try {
      if (!step()) {  // requests that cannot run yet: wait for a change, never spin
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::milliseconds(10));
      }
    } catch (const std::exception&) {  // a failed forward: end every request rather than spin
      std::lock_guard<std::mutex> lock(mu);
      cancel_all = true;
      reap_cancelled();
      cancel_all = false;
    }
  }
}

Engine::Engine(std::shared_ptr<const InferenceModel> model, const EngineOptions& opt) {
  EMBER_CHECK(model != nullptr, "engine: no model");
  impl_ = std::make_unique<Impl>(std::move(model), opt);
}

Engine::~Engine() {
  try {
    shutdown(std::chrono::milliseconds(0));
  } catch (...) {  // a destructor never throws; the thread is gone either way
  }
}

std::shared_ptr<RequestHandle> Engine::submit(EngineRequest req) {
  Impl& m = *impl_;
  m.check_request(req);
  std::lock_guard<std::mutex> lock(m.mu);
  if (!m.accepting) throw QueueFull("engine: shutting down; no new requests");
  if (m.sched.n_waiting() >= m.opt.max_queue) {
    throw QueueFull(detail::concat("engine: ", m.opt.max_queue, " requests already wait"));
  }
  const int64_t id = m.next_id++;
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->tokens = req.prompt;
  seq->prompt_len = static_cast<int64_t>(req.prompt.size());
  seq->use_prefix_cache = m.opt.prefix_cache && !req.prompt_logprobs;  // they need every row
  seq->prompt_logits = req.prompt_logprobs;
  seq->share_from = req.prompt_logprobs ? 0 : req.share_prompt_with;
  auto handle = std::make_shared<RequestHandle>(id);
  Request r{req, handle, TokenSampler(req.sampling), Clock::now(), Clock::now(), 0, {}, false};
  if (req.prompt_logprobs) {
    r.prompt_logprobs.push_back({req.prompt[0], std::numeric_limits<double>::quiet_NaN(), {}});
  }
  m.stats.prompt_tokens += static_cast<uint64_t>(seq->prompt_len);
  const bool queued = m.sched.add(std::move(seq));
  EMBER_CHECK(queued, "engine: the scheduler's queue is full");  // the check above holds the lock
  m.requests.emplace(id, std::move(r));
  m.cv.notify_all();
  return handle;
}

void Engine::start() {
  EMBER_CHECK(!impl_->thread.joinable(), "engine: start() called twice");
  impl_->thread = std::thread([this] { impl_->run(); });
}

void Engine::shutdown(std::chrono::milliseconds grace) {
  Impl& m = *impl_;
  const Clock::time_point deadline = Clock::now() + grace;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.accepting = false;
  }
  if (m.thread.joinable()) {
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv.wait_until(lock, deadline, [&] { return m.requests.empty(); });
    m.cancel_all = true;
    m.stop_thread = true;
    lock.unlock();
    m.cv.notify_all();
    m.thread.join();
    return;
  }
  while (Clock::now() < deadline && step()) {
  }
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.cancel_all = true;
  }
  step();  // reaps every request left
}

bool Engine::step() {
  EMBER_CHECK(!impl_->thread.joinable(), "engine: step() while the background thread runs");
  std::lock_guard<std::mutex> one_step(impl_->step_mu);
  return impl_->step();
}

EngineStats Engine::stats() const {
  const Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  EngineStats s = m.stats;
  s.prefix_cache_queries = m.sched.prefix_queries();
  s.prefix_cache_hits = m.sched.prefix_hits();
  s.preemptions = m.sched.preemptions();
  s.running = m.sched.n_running();
  s.waiting = m.sched.n_waiting();
  s.kv_blocks_total = m.blocks.n_blocks();
  s.kv_blocks_used = m.blocks.n_used();
  s.kv_blocks_free = m.blocks.n_free();
  return s;
}

const EngineOptions& Engine::options() const {
  return impl_->opt;
}

const nn::ModelConfig& Engine::config() const {
  return impl_->model->config();
}

}  // namespace ember::inference
