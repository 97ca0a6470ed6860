// Thread placement, set once when a program starts, with EMBER_PIN_THREADS=1:
// each OpenMP thread pinned to its own CPU among those the process may run on,
// so the OS does not move threads between cores mid-step. Off by default: on
// an idle 2-core machine it changed no step time measurably (ember bench,
// dense-small and gpt2-small), and on a shared machine a pinned thread cannot
// escape a busy core. Never when the user or the launcher places threads
// (OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY set), nor when the team does
// not fill exactly the CPUs the process may run on.
#pragma once

namespace ember {

// Pins the threads of OpenMP's current team size when EMBER_PIN_THREADS=1;
// returns true when it did.
// Call once, after the thread count is final and before the work starts.
bool pin_threads();

}  // namespace ember
