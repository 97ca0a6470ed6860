// Fixture for tests/check_layering_catches.cmake: CLI11 in apps/cli/ (allowed); apps includes everything.
#include <CLI/CLI.hpp>
#include "ember/ember.h"
#include "apps/train/loop.h"
