// Fixture for tests/check_layering_catches.cmake: allowed includes only.
#include <vector>
#include "core/dtype.h"
#include "ember/version.h"
#include "local_helper.h"
