// Thread placement, set once when a program starts, with EMBER_PIN_THREADS=1:
// each OpenMP thread pinned to its own CPU among those the process may run on,
// so the OS does not move threads between cores mid-step. Off by default: on
// an idle 2-core machine it changed no step time measurably (ember bench,
// dense-small and gpt2-small), and on a shared machine a pinned thread cannot
// escape a busy core. Never when the user or the launcher places threads
// (OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY set), nor when the team does
// not fill exactly the CPUs the process may run on.
//
// And kParallelGrain: the one threshold below which a loop stays on one thread.
#pragma once
#include <cstdint>

namespace ember {

// Below this many elements (or multiply-adds) a loop stays on one thread:
// starting and joining an OpenMP team costs microseconds, more than a short
// loop gains by splitting. Loops of the cheapest operations (a division, a sum
// of words) use 2 * kParallelGrain. The `omp parallel ... if (...)` clauses of
// the kernels, ops, optimizers and dist name it (`if (n > kParallelGrain)`).
constexpr int64_t kParallelGrain = 32768;

// Pins the threads of OpenMP's current team size when EMBER_PIN_THREADS=1;
// returns true when it did.
// Call once, after the thread count is final and before the work starts.
bool pin_threads();

}  // namespace ember
