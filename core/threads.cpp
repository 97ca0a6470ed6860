// Thread pinning (see threads.h): thread t of the team goes to the t-th CPU
// of the process's affinity mask. libgomp keeps the same threads for later
// parallel regions of the same size, so the placement holds for the run.
#include "core/threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ember {

bool pin_threads() {
  for (const char* var : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"}) {
    if (const char* v = std::getenv(var); v && *v) return false;
  }
  const char* opt_in = std::getenv("EMBER_PIN_THREADS");
  if (!opt_in || std::strcmp(opt_in, "1") != 0) return false;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  const int threads = omp_get_max_threads();
  // Only a team that fills the allowed CPUs: two runs of fewer threads each
  // would otherwise both pin to the first CPUs and share them.
  if (static_cast<int>(cpus.size()) != threads) return false;
  std::atomic<bool> ok{true};
#pragma omp parallel num_threads(threads)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[omp_get_thread_num()], &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) ok = false;
  }
  return ok;
}

}  // namespace ember
