// lr_at for each schedule kind.
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ember::optim {

double lr_at(const Schedule& s, int64_t step) {
  if (s.warmup > 0 && step < s.warmup) {
    return s.lr_max * static_cast<double>(step + 1) / static_cast<double>(s.warmup);
  }
  const double after = static_cast<double>(step - s.warmup);
  const double span = static_cast<double>(std::max<int64_t>(1, s.total - s.warmup));
  if (s.kind == "cosine") {
    const double progress = std::min(1.0, after / span);
    return s.lr_min + 0.5 * (s.lr_max - s.lr_min) * (1.0 + std::cos(M_PI * progress));
  }
  if (s.kind == "constant") return s.lr_max;
  if (s.kind == "linear") {
    const double progress = std::min(1.0, after / span);
    return s.lr_max + (s.lr_min - s.lr_max) * progress;
  }
  if (s.kind == "wsd") {
    const int64_t decay_start = s.total - s.decay_steps;
    if (step < decay_start || s.decay_steps <= 0) return s.lr_max;
    const double progress =
        std::min(1.0, static_cast<double>(step - decay_start) / static_cast<double>(s.decay_steps));
    return s.lr_max + (s.lr_min - s.lr_max) * progress;
  }
  throw Error("unknown learning-rate schedule \"" + s.kind + "\" (cosine, constant, linear, wsd)");
}

}  // namespace ember::optim
