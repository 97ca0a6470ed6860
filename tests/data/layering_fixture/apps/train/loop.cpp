// Fixture for tests/check_layering_catches.cmake: CLI11 in the training runtime (one violation).
#include <CLI/CLI.hpp>
#include "dist/communicator.h"
