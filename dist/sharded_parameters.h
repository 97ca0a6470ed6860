// dist::ShardedParameters: ZeRO-3's parameter store. Over a Reducer built
// with units (ReducerOptions::units: one per transformer block, one for the
// rest), each rank keeps only its shard of every bucket (the same pieces as
// its gradient shard; dist::ZeroAdamW updates it in place), and a unit's
// parameters hold memory only between gather(unit) and release(unit): their
// Storage objects stay (views and tensors saved for backward remain valid)
// while the bytes are dropped (core/storage.h). A gather is a non-blocking
// all-gather of each of the unit's buckets (prefetch starts it early).
#pragma once
#include <functional>
#include <vector>

#include "dist/reducer.h"

namespace ember::dist {

class ShardedParameters {
 public:
  // reducer: with units, over parameters that all require grad, each owning
  // its whole contiguous storage; it must outlive this store.
  explicit ShardedParameters(Reducer& reducer);
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;
  ~ShardedParameters();

  // Copies this rank's pieces of the (full, equal on every rank) parameters
  // into the shard and releases every unit, emptying the allocator's cache
  // (release_all after hold_all does too). Not collective.
  void shard();
  // This rank's shard of the layout (Reducer::shard_numel() elements).
  const Tensor& values() const { return shard_view_; }

  // Units are 0 .. units() - 1 (the Reducer's unit ids).
  int64_t units() const { return static_cast<int64_t>(unit_buckets_.size()); }
  // Starts the unit's gather unless it is resident or in flight. Collective
  // (every rank starts the same gathers in the same order).
  void prefetch(int64_t unit);
  // The unit's parameters resident and current (prefetch, then wait). When the
  // shard changed since the unit's last gather, their versions are bumped.
  void gather(int64_t unit);
  // Drops the unit's parameter memory (waits for a gather in flight first).
  // Not collective. Ignored while everything is held (hold_all).
  void release(int64_t unit);
  // Every unit resident until release_all() (checkpoints, evaluation, the
  // sample: code that reads parameters on some ranks only). Collective.
  void hold_all();
  // Releases every unit (also after hold_all). Not collective.
  void release_all();
  bool resident(int64_t unit) const;
  // Every unit in turn: gathered (the next one's gather started meanwhile),
  // visit(unit, its parameters) called, then released, so no more than two
  // units are held beyond the shard (a checkpoint's save streams the
  // parameters this way, not 4P on every rank). Starts by releasing every
  // unit. Collective; a throw from visit must happen on every rank alike.
  void for_each_unit(const std::function<void(int64_t unit, const std::vector<Variable>& params)>& visit);

  // Parameter bytes this rank holds now: the shard, resident parameters and
  // gather buffers in flight.
  int64_t held_bytes() const;

 private:
  enum class Residency { Released, InFlight, Resident };
  struct Unit {
    std::vector<size_t> buckets;
    std::vector<Tensor> buffers;  // per bucket while in flight
    std::vector<Request> requests;
    Residency residency = Residency::Released;
    uint64_t shard_version = 0;  // of the shard at the last gather
    bool gathered_once = false;
  };
  void finish_gather(Unit& u);
  void check_unit(int64_t unit) const;

  Reducer& reducer_;
  Tensor shard_, shard_view_;  // shard_ holds at least one element
  std::vector<Unit> unit_buckets_;
  bool held_ = false;
};

}  // namespace ember::dist
