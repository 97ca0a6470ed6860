// Fixture for tests/check_layering_catches.cmake: the umbrella header: the library without apps (allowed).
#include "nn/module.h"
#include "dist/communicator.h"
