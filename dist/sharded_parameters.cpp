// ShardedParameters: the shard taken from the full parameters, the gather of a
// unit (its buckets' pieces all-gathered into bucket buffers, copied into the
// re-acquired parameter storages) and its release.
#include "dist/sharded_parameters.h"

#include <cstring>

#include "autograd/autocast.h"
#include "core/allocator.h"

namespace ember::dist {

ShardedParameters::ShardedParameters(Reducer& reducer) : reducer_(reducer) {
  const std::vector<int64_t>& units = reducer.options().units;
  const std::vector<Variable>& params = reducer.params();
  EMBER_CHECK(!units.empty() && units.size() == params.size(),
              "ShardedParameters: the Reducer must be built with one unit per parameter, every "
              "parameter trained (", params.size(), " trained of ", units.size(), ")");
  for (const Variable& p : params) {
    const Tensor& d = p.data();
    EMBER_CHECK(d.is_contiguous() && d.offset() == 0 && d.storage()->nbytes() == d.nbytes(),
                "ShardedParameters: a parameter of shape ", shape_str(d.shape()),
                " is a view of a larger storage; ZeRO-3 needs each to own its memory");
  }
  int64_t n_units = 0;
  for (int64_t u : units) {
    EMBER_CHECK(u >= 0, "ShardedParameters: unit ids must be >= 0");
    n_units = std::max(n_units, u + 1);
  }
  unit_buckets_.resize(static_cast<size_t>(n_units));
  const std::vector<Bucket>& buckets = reducer.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b].params.empty()) continue;
    Unit& u = unit_buckets_[static_cast<size_t>(units[buckets[b].params[0]])];
    u.buckets.push_back(b);
    u.buffers.emplace_back();
    u.requests.emplace_back();
  }
  const DType dtype = params.empty() ? DType::Float32 : params[0].dtype();
  shard_ = Tensor::zeros({std::max<int64_t>(reducer.shard_numel(), 1)}, dtype);
  shard_view_ = shard_.narrow(0, 0, reducer.shard_numel());
}

ShardedParameters::~ShardedParameters() {
  for (Unit& u : unit_buckets_) {  // buffers must outlive the gathers writing into them
    for (Request& r : u.requests) {
      try {
        reducer_.comm().wait(r);
      } catch (...) {
      }
    }
  }
}

void ShardedParameters::check_unit(int64_t unit) const {
  EMBER_CHECK(unit >= 0 && unit < units(), "ShardedParameters: unit ", unit, " of ", units());
}

void ShardedParameters::shard() {
  const std::vector<Variable>& params = reducer_.params();
  const int rank = reducer_.comm().rank();
  for (const Unit& u : unit_buckets_) {
    for (size_t b : u.buckets) {
      const int64_t lo = reducer_.piece_begin(b, rank), hi = reducer_.piece_begin(b, rank + 1);
      for (size_t k : reducer_.buckets()[b].params) {
        const int64_t off = reducer_.flat_offset(k), n = params[k].numel();
        const int64_t begin = std::max(off, lo), end = std::min(off + n, hi);
        if (begin >= end) continue;
        shard_.narrow(0, reducer_.shard_offset(b) + begin - lo, end - begin)
            .copy_(params[k].data().reshape({n}).narrow(0, begin - off, end - begin));
      }
    }
  }
  held_ = false;
  for (int64_t u = 0; u < units(); ++u) {
    unit_buckets_[static_cast<size_t>(u)].residency = Residency::Resident;
    release(u);
  }
  allocator_empty_cache();  // the full parameters' blocks go back to the system
}

void ShardedParameters::prefetch(int64_t unit) {
  check_unit(unit);
  Unit& u = unit_buckets_[static_cast<size_t>(unit)];
  if (u.residency != Residency::Released) return;
  Communicator& comm = reducer_.comm();
  const int rank = comm.rank();
  for (size_t j = 0; j < u.buckets.size(); ++j) {
    const size_t b = u.buckets[j];
    const Bucket& bucket = reducer_.buckets()[b];
    if (bucket.params.size() == 1) {
      // One parameter (the token table): gathered straight into its storage, not through a
      // second buffer of its size.
      const Tensor& d = reducer_.params()[bucket.params[0]].data();
      d.storage()->reacquire();
      u.buffers[j] = d.reshape({bucket.end - bucket.begin});
    } else {
      u.buffers[j] = Tensor::empty({bucket.end - bucket.begin}, shard_.dtype());
    }
    const int64_t lo = reducer_.piece_begin(b, rank), n = reducer_.piece_begin(b, rank + 1) - lo;
    if (n > 0) {
      u.buffers[j].narrow(0, lo - bucket.begin, n).copy_(shard_.narrow(0, reducer_.shard_offset(b), n));
    }
    u.requests[j] = comm.iall_gather_in_place(u.buffers[j], reducer_.bucket_shard_counts(b));
  }
  u.residency = Residency::InFlight;
}

// The gathered buckets into the parameters' re-acquired storages (a raw copy:
// the version moves only when the values did).
void ShardedParameters::finish_gather(Unit& u) {
  const std::vector<Variable>& params = reducer_.params();
  const bool changed = !u.gathered_once || u.shard_version != shard_.version();
  for (size_t j = 0; j < u.buckets.size(); ++j) {
    reducer_.comm().wait(u.requests[j]);
    const Bucket& bucket = reducer_.buckets()[u.buckets[j]];
    const char* from = static_cast<const char*>(u.buffers[j].raw_data());
    for (size_t k : bucket.params) {
      const Tensor& d = params[k].data();
      d.storage()->reacquire();
      const size_t elem = dtype_size(d.dtype());
      const char* src = from + (reducer_.flat_offset(k) - bucket.begin) * elem;
      if (src != d.raw_data()) std::memcpy(d.raw_data(), src, d.nbytes());
      if (changed) d.bump_version();
    }
    u.buffers[j] = Tensor();
  }
  u.shard_version = shard_.version();
  u.gathered_once = true;
  u.residency = Residency::Resident;
}

void ShardedParameters::gather(int64_t unit) {
  EMBER_PROFILE_SCOPE(kCommFamily);
  prefetch(unit);
  Unit& u = unit_buckets_[static_cast<size_t>(unit)];
  if (u.residency == Residency::InFlight) finish_gather(u);
}

void ShardedParameters::release(int64_t unit) {
  check_unit(unit);
  Unit& u = unit_buckets_[static_cast<size_t>(unit)];
  if (held_ || u.residency == Residency::Released) return;
  if (u.residency == Residency::InFlight) finish_gather(u);
  const std::vector<Variable>& params = reducer_.params();
  for (size_t b : u.buckets) {
    for (size_t k : reducer_.buckets()[b].params) {
      const Tensor& d = params[k].data();
      autocast_forget(d);
      d.storage()->release();
    }
  }
  u.residency = Residency::Released;
}

void ShardedParameters::hold_all() {
  for (int64_t u = 0; u < units(); ++u) prefetch(u);
  for (int64_t u = 0; u < units(); ++u) gather(u);
  held_ = true;
}

void ShardedParameters::release_all() {
  const bool was_held = held_;
  held_ = false;
  for (int64_t u = 0; u < units(); ++u) release(u);
  if (was_held) allocator_empty_cache();  // the step's gathers need two blocks, not them all
}

void ShardedParameters::for_each_unit(
    const std::function<void(int64_t unit, const std::vector<Variable>& params)>& visit) {
  release_all();  // a resident unit may predate the last update
  const std::vector<Variable>& all = reducer_.params();
  for (int64_t unit = 0; unit < units(); ++unit) {
    gather(unit);
    if (unit + 1 < units()) prefetch(unit + 1);
    std::vector<Variable> params;
    for (size_t b : unit_buckets_[static_cast<size_t>(unit)].buckets) {
      for (size_t k : reducer_.buckets()[b].params) params.push_back(all[k]);
    }
    try {
      visit(unit, params);
    } catch (...) {
      release_all();
      throw;
    }
    release(unit);
  }
}

bool ShardedParameters::resident(int64_t unit) const {
  check_unit(unit);
  return unit_buckets_[static_cast<size_t>(unit)].residency == Residency::Resident;
}

int64_t ShardedParameters::held_bytes() const {
  int64_t bytes = static_cast<int64_t>(shard_.nbytes());
  for (const Variable& p : reducer_.params()) {
    if (p.data().storage()->data() != nullptr) bytes += static_cast<int64_t>(p.data().nbytes());
  }
  for (const Unit& u : unit_buckets_) {
    for (const Tensor& t : u.buffers) bytes += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  }
  return bytes;
}

}  // namespace ember::dist
