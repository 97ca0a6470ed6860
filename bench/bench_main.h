// A benchmark's main body under a catch: an error (a config file that cannot be read, an
// option's bad value) ends it with one line "NAME: what" and exit code 1, not an abort.
#pragma once
#include <cstdio>
#include <exception>

namespace ember::bench {

template <class Body>
int main_reporting_errors(const char* name, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace ember::bench
