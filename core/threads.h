// Thread placement, set once when a program starts: each OpenMP thread pinned
// to its own CPU among those the process may run on, so the OS does not move
// threads between cores mid-step (their caches stay warm, no two share a core).
// Left to the user or the launcher when they place threads themselves
// (OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY set), when EMBER_PIN_THREADS=0,
// or when the team does not fill exactly the CPUs the process may run on.
#pragma once

namespace ember {

// Pins the threads of OpenMP's current team size; returns true when it did.
// Call once, after the thread count is final and before the work starts.
bool pin_threads();

}  // namespace ember
