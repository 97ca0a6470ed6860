// Fixture for tests/check_layering_catches.cmake: MPI in its one file (allowed).
#include <mpi.h>
#include "optim/optimizer.h"
