// Fixture for tests/check_layering_catches.cmake: the HDF5 C API in its one file (allowed).
#include <hdf5.h>
#include "core/tensor.h"
