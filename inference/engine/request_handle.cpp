// The caller's side of a request: events pushed by the engine thread are merged
// until next() takes them; cancel() only raises a flag the next step reads.
// Also the small value types of inference/engine/engine.h (finish reasons, histograms).
#include <atomic>
#include <condition_variable>
#include <mutex>

#include "inference/engine/engine.h"

namespace ember::inference {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
  }
  return "unknown";
}

void Histogram::observe(double x) {
  if (counts.size() != bounds.size() + 1) counts.assign(bounds.size() + 1, 0);
  for (size_t i = 0; i < bounds.size(); ++i) counts[i] += x <= bounds[i] ? 1 : 0;
  ++counts.back();
  sum += x;
}

struct RequestHandle::State {
  std::mutex m;
  std::condition_variable cv;
  std::optional<EngineEvent> pending;
  bool finished_taken = false;
  std::atomic<bool> cancel{false};
};

std::shared_ptr<RequestHandle::State> RequestHandle::make_state() {
  return std::make_shared<State>();
}

namespace {

template <class T>
void append(std::vector<T>& to, std::vector<T>& from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

}  // namespace

void RequestHandle::push(EngineEvent ev) {
  {
    std::lock_guard<std::mutex> lock(state_->m);
    if (!state_->pending) {
      state_->pending = std::move(ev);
    } else {
      EngineEvent& p = *state_->pending;
      append(p.tokens, ev.tokens);
      append(p.logprobs, ev.logprobs);
      append(p.prompt_logprobs, ev.prompt_logprobs);
      p.finished = p.finished || ev.finished;
      if (ev.finished) p.reason = ev.reason;
      p.prompt_tokens = ev.prompt_tokens;
      p.cached_prompt_tokens = ev.cached_prompt_tokens;
    }
  }
  state_->cv.notify_all();
}

std::optional<EngineEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->m);
  if (state_->finished_taken) return std::nullopt;
  // A zero timeout only looks: wait_for would still make a futex call (a system call and a
  // reschedule per poll, which cost a rollout polling 64 handles a step about 5% of its time).
  if (timeout.count() > 0) state_->cv.wait_for(lock, timeout, [&] { return state_->pending.has_value(); });
  if (!state_->pending) return std::nullopt;
  std::optional<EngineEvent> out = std::move(state_->pending);
  state_->pending.reset();
  state_->finished_taken = out->finished;
  return out;
}

void RequestHandle::cancel() {
  state_->cancel = true;
}

bool RequestHandle::cancel_requested() const {
  return state_->cancel;
}

}  // namespace ember::inference
