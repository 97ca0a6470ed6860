// A ParallelGroup of T threads in one process, for testing the tensor-parallel ops
// (autograd/parallel_ops.h) at T > 1 without MPI: run_ranks(T, fn) runs fn(group) on T
// threads, one per rank, whose all-reduces combine their tensors in place. Catch2's CHECK
// is not thread-safe: fn returns what each rank saw and the caller checks it after the join.
#pragma once
#include <algorithm>
#include <barrier>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "autograd/parallel_group.h"
#include "core/error.h"

namespace ember::testing {

class ThreadGroup final : public ParallelGroup {
 public:
  struct Shared {
    explicit Shared(int n) : barrier(n), slots(n) {}
    std::barrier<> barrier;
    std::vector<const Tensor*> slots;
  };
  ThreadGroup(std::shared_ptr<Shared> shared, int rank) : shared_(std::move(shared)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(shared_->slots.size()); }
  void all_reduce_sum(const Tensor& t) const override { reduce(t, false); }
  void all_reduce_max(const Tensor& t) const override { reduce(t, true); }

 private:
  // Every rank publishes its tensor, reads all of them into its own result, waits until all
  // have read, then writes its result in place.
  void reduce(const Tensor& t, bool max) const {
    EMBER_CHECK(t.is_contiguous() && is_floating(t.dtype()), "ThreadGroup: bad tensor");
    shared_->slots[rank_] = &t;
    shared_->barrier.arrive_and_wait();
    std::vector<double> out = shared_->slots[0]->to_vector<double>();
    for (size_t r = 1; r < shared_->slots.size(); ++r) {
      const std::vector<double> v = shared_->slots[r]->to_vector<double>();
      EMBER_CHECK(v.size() == out.size(), "ThreadGroup: ranks reduce tensors of different sizes");
      for (size_t i = 0; i < out.size(); ++i) out[i] = max ? std::max(out[i], v[i]) : out[i] + v[i];
    }
    shared_->barrier.arrive_and_wait();
    t.copy_(Tensor::from_vector(out, t.shape()).to(t.dtype()));
  }

  std::shared_ptr<Shared> shared_;
  int rank_;
};

// fn(const ParallelGroup&) on T threads; returns each rank's result, indexed by rank. An
// exception on a rank is rethrown after the join (its peers must not be left in a collective).
template <class Fn>
auto run_ranks(int T, Fn fn) {
  using Result = decltype(fn(std::declval<const ParallelGroup&>()));
  auto shared = std::make_shared<ThreadGroup::Shared>(T);
  std::vector<Result> results(T);
  std::vector<std::exception_ptr> errors(T);
  std::vector<std::thread> threads;
  for (int r = 0; r < T; ++r) {
    threads.emplace_back([&, r] {
      try {
        const ThreadGroup group(shared, r);
        results[r] = fn(group);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

}  // namespace ember::testing
