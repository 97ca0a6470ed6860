// The Catch2 main of the MPI tests: one Communicator (MPI init / finalize
// when launched by mpirun) around the session; the exit code is non-zero
// on every rank when a test failed on any rank.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "mpi_testing.h"

namespace {
ember::dist::Communicator* g_comm = nullptr;
}

ember::dist::Communicator& ember::testing::comm() {
  return *g_comm;
}

int main(int argc, char** argv) {
  ember::dist::Communicator comm;
  g_comm = &comm;
  Catch::Session session;
  // mpirun hands the ranks a pseudo-terminal: no colour codes in CTest logs.
  if (comm.uses_mpi()) session.configData().useColour = Catch::UseColour::No;
  const int failed = session.run(argc, argv);
  const bool any_failed = comm.any(failed != 0);
  g_comm = nullptr;
  return any_failed ? 1 : 0;
}
