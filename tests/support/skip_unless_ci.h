// A test that needs root, a mount, a tool or an npm package says why when it
// skips locally; in CI (CI set: .ci/run installs everything and runs as root) it
// fails instead. Use inside a TEST_CASE body: it returns from it.
#pragma once
#include <catch2/catch.hpp>

#include <cstdlib>

#define EMBER_SKIP_UNLESS_CI(reason)            \
  do {                                         \
    if (std::getenv("CI") != nullptr) {        \
      FAIL("cannot run in CI: " << reason);    \
    }                                          \
    WARN("skipped: " << reason);               \
    return;                                    \
  } while (0)
