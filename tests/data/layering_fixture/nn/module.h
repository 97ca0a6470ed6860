// Fixture for tests/check_layering_catches.cmake: a library header that includes apps/ (one violation).
#include "autograd/variable.h"
#include "apps/train/trainer.h"
