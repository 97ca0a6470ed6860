// A diverged run must not be saved: the name of the first parameter holding a
// non-finite value (NaN or +-inf), or "" when all are finite. One vectorised
// pass over float32 parameters (sum of x * 0: 0 unless some x is not finite).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace ember::apps {

std::string first_non_finite_parameter(const std::vector<std::pair<std::string, Variable>>& named);

}  // namespace ember::apps
