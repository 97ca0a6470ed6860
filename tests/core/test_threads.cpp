// Thread pinning (EMBER_PIN_THREADS=1): each thread of a team that fills the
// allowed CPUs gets its own CPU; off by default and under the user's placement variables.
#include <catch2/catch.hpp>

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "core/threads.h"

using namespace ember;

namespace {

int allowed_cpus() {
  cpu_set_t s;
  CPU_ZERO(&s);
  REQUIRE(sched_getaffinity(0, sizeof s, &s) == 0);
  return CPU_COUNT(&s);
}

}  // namespace

TEST_CASE("pin_threads gives each thread its own CPU, unless told not to", "[threads]") {
  const int cpus = allowed_cpus();
  const int before = omp_get_max_threads();

  unsetenv("EMBER_PIN_THREADS");
  CHECK_FALSE(pin_threads());  // off by default
  setenv("EMBER_PIN_THREADS", "0", 1);
  CHECK_FALSE(pin_threads());
  setenv("EMBER_PIN_THREADS", "1", 1);
  setenv("OMP_PLACES", "cores", 1);
  CHECK_FALSE(pin_threads());
  unsetenv("OMP_PLACES");

  if (cpus > 1) {  // a team smaller than the allowed CPUs is left alone
    omp_set_num_threads(cpus - 1);
    CHECK_FALSE(pin_threads());
  }

  omp_set_num_threads(cpus);
  REQUIRE(pin_threads());
  std::vector<int> count(cpus), first(cpus);
#pragma omp parallel num_threads(cpus)
  {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    pthread_getaffinity_np(pthread_self(), sizeof mine, &mine);
    count[omp_get_thread_num()] = CPU_COUNT(&mine);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mine)) {
        first[omp_get_thread_num()] = c;
        break;
      }
    }
  }
  for (int t = 0; t < cpus; ++t) CHECK(count[t] == 1);
  CHECK(std::set<int>(first.begin(), first.end()).size() == static_cast<size_t>(cpus));
  omp_set_num_threads(before);
  unsetenv("EMBER_PIN_THREADS");
}
