// Learning-rate schedules as pure functions of the 0-based step s.
//   cosine (docs/model.md#learning-rate-schedules): lr_max (s+1)/warmup while s < warmup, then
//     lr_min + 0.5 (lr_max - lr_min)(1 + cos(pi min(1, (s - warmup) / max(1, total - warmup))))
//   constant: warmup, then lr_max
//   linear:   warmup, then lr_max -> lr_min linearly over total - warmup steps
//   wsd (warmup-stable-decay): warmup, lr_max until total - decay_steps, then
//     linearly to lr_min at total
#pragma once
#include <cstdint>
#include <string>

namespace ember::optim {

struct Schedule {
  std::string kind = "cosine";  // cosine, constant, linear, wsd
  double lr_max = 3e-4;
  double lr_min = 0;
  int64_t warmup = 0;
  int64_t total = 1;
  int64_t decay_steps = 0;  // wsd only
};

double lr_at(const Schedule& schedule, int64_t step);

}  // namespace ember::optim
