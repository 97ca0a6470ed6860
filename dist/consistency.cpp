// Broadcast of parameters / named state, the parameter checksum (a position-
// mixed sum of splitmix64 hashes: parallel, order-free, bitwise), and the
// threads-per-rank rule (node cores, or the CPUs mpirun bound us to, / local ranks).
#include "dist/consistency.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/threads.h"

namespace ember::dist {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t bytes_hash(const unsigned char* data, int64_t n, uint64_t seed) {
  const int64_t words = n / 8;
  uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) if (words > 2 * kParallelGrain)
  for (int64_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, data + 8 * i, 8);
    sum += mix64(w ^ mix64(seed + static_cast<uint64_t>(i)));
  }
  for (int64_t i = words * 8; i < n; ++i) sum += mix64(data[i] ^ mix64(seed + 0x9e37 + i));
  return sum;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

}  // namespace

void broadcast_parameters(const Communicator& comm, const std::vector<Variable>& params, int root) {
  if (comm.world_size() == 1) return;
  NoGradGuard no_grad;
  for (const Variable& p : params) {
    const Tensor data = p.data().contiguous();
    comm.broadcast(data, root);
    if (!data.shares_storage(p.data())) p.data().copy_(data);
  }
}

std::map<std::string, Tensor> broadcast_state(const Communicator& comm,
                                              const std::map<std::string, Tensor>& state,
                                              int root) {
  if (comm.world_size() == 1) return state;
  // The directory (name, dtype, shape per line), then each tensor's elements.
  std::string directory;
  if (comm.rank() == root) {
    std::ostringstream out;
    for (const auto& [name, t] : state) {
      out << name << '\t' << static_cast<int>(t.dtype());
      for (int64_t d : t.shape()) out << ' ' << d;
      out << '\n';
    }
    directory = out.str();
  }
  comm.broadcast(directory, root);
  std::map<std::string, Tensor> result;
  std::istringstream in(directory);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    const std::string name = line.substr(0, tab);
    std::istringstream fields(line.substr(tab + 1));
    int dtype = 0;
    fields >> dtype;
    Shape shape;
    for (int64_t d; fields >> d;) shape.push_back(d);
    Tensor t = comm.rank() == root ? state.at(name).contiguous()
                                   : Tensor::empty(shape, static_cast<DType>(dtype));
    if (t.numel() > 0) comm.broadcast(t, root);
    result[name] = t;
  }
  return result;
}

uint64_t parameter_checksum(const std::vector<Variable>& params) {
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor t = params[k].data().contiguous();
    h = mix64(h ^ static_cast<uint64_t>(t.numel()) ^ (static_cast<uint64_t>(t.dtype()) << 56));
    if (t.numel() > 0) {
      h = mix64(h + bytes_hash(static_cast<const unsigned char*>(t.raw_data()),
                               static_cast<int64_t>(t.nbytes()), h));
    }
  }
  return h;
}

void check_parameters_consistent(const Communicator& comm, const std::vector<Variable>& params,
                                 int64_t step) {
  if (comm.world_size() == 1) return;
  const std::vector<uint64_t> sums = comm.all_gather(parameter_checksum(params));
  bool same = true;
  for (uint64_t s : sums) same = same && s == sums[0];
  if (same) return;
  std::string list;
  for (size_t r = 0; r < sums.size(); ++r) {
    list += detail::concat(r ? ", " : "", "rank ", r, " ", hex(sums[r]));
  }
  int first_bad = 0;
  for (size_t r = 1; r < sums.size(); ++r) {
    if (sums[r] != sums[0]) {
      first_bad = static_cast<int>(r);
      break;
    }
  }
  throw CollectiveError(
      detail::concat("parameters diverged across ranks at step ", step, " (checksums ", list,
                     "); the ranks no longer train the "
                     "same model"),
      first_bad);
}

void check_ranks_agree(const Communicator& comm,
                       const std::vector<std::pair<std::string, std::string>>& fields) {
  if (comm.world_size() == 1) return;
  auto value_hash = [](const std::string& name, const std::string& value) {
    const std::string both = name + '\0' + value;
    return bytes_hash(reinterpret_cast<const unsigned char*>(both.data()), static_cast<int64_t>(both.size()),
                      both.size());
  };
  // One gather of the field count and one of a hash over all fields; field by field only when they differ.
  uint64_t all = mix64(fields.size());
  for (const auto& [name, value] : fields) all = mix64(all + value_hash(name, value));
  const std::vector<uint64_t> counts = comm.all_gather(static_cast<uint64_t>(fields.size()));
  for (size_t r = 1; r < counts.size(); ++r) {
    if (counts[r] != counts[0]) {
      throw CollectiveError(detail::concat("ranks disagree on their settings (rank 0 has ", counts[0],
                                           ", rank ", r, " has ", counts[r], "); are they the same ember?"),
                            static_cast<int>(r));
    }
  }
  const std::vector<uint64_t> sums = comm.all_gather(all);
  bool same = true;
  for (uint64_t s : sums) same = same && s == sums[0];
  if (same) return;
  for (const auto& [name, value] : fields) {
    const std::vector<uint64_t> hashes = comm.all_gather(value_hash(name, value));
    int other = 0;
    for (size_t r = 1; r < hashes.size() && other == 0; ++r) {
      if (hashes[r] != hashes[0]) other = static_cast<int>(r);
    }
    if (other == 0) continue;
    std::string first = value, second = value;
    comm.broadcast(first, 0);
    comm.broadcast(second, other);
    auto shown = [](std::string v) {
      if (v.empty()) return std::string("(none)");
      if (v.size() <= 80) return v;
      return v.substr(0, 60) + "... (digest " + hex(bytes_hash(reinterpret_cast<const unsigned char*>(v.data()),
                                                                static_cast<int64_t>(v.size()), 0)) + ")";
    };
    throw CollectiveError(detail::concat("ranks disagree on ", name, " (rank 0: ", shown(first), ", rank ",
                                         other, ": ", shown(second), "); every rank of a run needs the same"),
                          other);
  }
}

int threads_per_rank(const Communicator& comm) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  int threads = static_cast<int>(cores / std::max(1, comm.local_size()));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int allowed = CPU_COUNT(&set);  // mpirun's binding (one core per rank by default)
    if (allowed > 0) threads = std::min(threads, allowed);
  }
  return std::max(1, threads);
}

int set_threads_per_rank(const Communicator& comm) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env && *env) return omp_get_max_threads();
  const int threads = threads_per_rank(comm);
  omp_set_num_threads(threads);
  return threads;
}

}  // namespace ember::dist
