// Fixture for tests/check_layering_catches.cmake: MPI outside dist/communicator.cpp (one violation).
#include "autograd/variable.h"
#include <mpi.h>
// #include "apps/trainer.h" (a comment: not an include)
