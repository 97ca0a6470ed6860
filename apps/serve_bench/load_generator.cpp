// run_load: client threads fed by a ticket source (closed loop: a counter;
// open loop: a queue a scheduler thread fills at the arrival times).
#include "apps/serve_bench/load_generator.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "core/error.h"

namespace ember::apps {

namespace {

using Clock = std::chrono::steady_clock;

// Hands out the indices of the requests to send, to any number of client threads.
class Tickets {
 public:
  Tickets(const LoadPlan& plan, Clock::time_point start)
      : plan_(plan),
        open_loop_(std::isfinite(plan.rate)),
        deadline_(start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(plan.duration_s))) {}

  // The next request to send, or nullopt when the level is over.
  std::optional<uint64_t> next() {
    std::unique_lock lock(mutex_);
    if (!open_loop_) {
      if (!may_start(next_index_, Clock::now())) return std::nullopt;
      return next_index_++;
    }
    ready_cv_.wait(lock, [&] { return !ready_.empty() || closed_; });
    if (ready_.empty()) return std::nullopt;
    const uint64_t index = ready_.front();
    ready_.pop_front();
    return index;
  }

  // Open loop: releases the requests at their arrival times (run on its own thread).
  void schedule(Clock::time_point start) {
    std::mt19937_64 rng(plan_.seed);
    std::exponential_distribution<double> gap(plan_.rate);
    double at = 0;
    for (uint64_t index = 0;; ++index) {
      const Clock::time_point when =
          start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at));
      if (!may_start(index, when)) break;
      std::this_thread::sleep_until(when);
      {
        std::lock_guard lock(mutex_);
        ready_.push_back(index);
      }
      ready_cv_.notify_one();
      at += plan_.poisson ? gap(rng) : 1.0 / plan_.rate;
    }
    std::lock_guard lock(mutex_);
    closed_ = true;
    ready_cv_.notify_all();
  }

 private:
  bool may_start(uint64_t index, Clock::time_point when) const {
    if (plan_.duration_s > 0) return when < deadline_;
    return index < static_cast<uint64_t>(plan_.requests);
  }

  const LoadPlan& plan_;
  const bool open_loop_;
  const Clock::time_point deadline_;
  std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::deque<uint64_t> ready_;
  bool closed_ = false;
  uint64_t next_index_ = 0;
};

// The records of all clients, with counts for progress reports.
struct Collected {
  std::mutex mutex;
  std::condition_variable finished_cv;
  std::vector<RequestRecord> records;
  int64_t ok = 0, failed = 0, dropped = 0;
  int clients_left = 0;
};

void client_loop(Tickets& tickets, const RequestRunner& run_one, Collected& out) {
  while (const std::optional<uint64_t> index = tickets.next()) {
    RequestRecord r;
    try {
      r = run_one(*index);
    } catch (const std::exception& e) {  // counted as a failure, never the end of the thread
      r.sent = r.ended = Clock::now();
      r.error = e.what();
    }
    std::lock_guard lock(out.mutex);
    (r.outcome == RequestOutcome::Ok        ? out.ok
     : r.outcome == RequestOutcome::Dropped ? out.dropped
                                            : out.failed) += 1;
    out.records.push_back(std::move(r));
  }
  std::lock_guard lock(out.mutex);
  --out.clients_left;
  out.finished_cv.notify_all();
}

}  // namespace

LevelRun run_load(const LoadPlan& plan, const RequestRunner& run_one,
                  const ProgressReport& progress, std::chrono::milliseconds progress_interval) {
  EMBER_CHECK(plan.concurrency >= 1, "run_load: concurrency must be positive");
  const Clock::time_point start = Clock::now();
  Tickets tickets(plan, start);
  Collected out;
  out.clients_left = plan.concurrency;
  std::vector<std::thread> threads;
  if (std::isfinite(plan.rate)) threads.emplace_back([&] { tickets.schedule(start); });
  for (int c = 0; c < plan.concurrency; ++c)
    threads.emplace_back([&] { client_loop(tickets, run_one, out); });
  {
    std::unique_lock lock(out.mutex);
    while (
        !out.finished_cv.wait_for(lock, progress_interval, [&] { return out.clients_left == 0; })) {
      if (progress)
        progress(std::chrono::duration<double>(Clock::now() - start).count(), out.ok, out.failed,
                 out.dropped);
    }
  }
  for (std::thread& t : threads) t.join();
  LevelRun run;
  run.records = std::move(out.records);
  std::sort(run.records.begin(), run.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.sent < b.sent; });
  Clock::time_point end = start;
  for (const RequestRecord& r : run.records) end = std::max(end, r.ended);
  run.wall_seconds = std::chrono::duration<double>(end - start).count();
  return run;
}

}  // namespace ember::apps
