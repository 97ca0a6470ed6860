// Fixture for tests/check_layering_catches.cmake: MPI outside dist/communicator.cpp (one violation).
#include "autograd/variable.h"
#include <mpi.h>
// #include "apps/train/trainer.h" (a comment: not an include)
