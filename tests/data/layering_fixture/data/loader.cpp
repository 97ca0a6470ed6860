// Fixture for tests/check_layering_catches.cmake: data/ reaching up into nn/ (one violation).
#include "core/tensor.h"
  #  include "nn/module.h"
