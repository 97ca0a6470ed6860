// Progress of `ember train` on stdout. Every --log-every steps a plain line
// whose format is fixed (scripts and tests parse it), e.g. (one line)
//   step    120/1000 | loss 2.3456 | lr 3.00e-04 | norm 0.812 | 12345 tok/s | 83 ms |
//   MFU 12.3% | ETA 0:01:13
// and, when stdout is a terminal, below those lines a bar redrawn in place
// (\r) after every step:
//   [#.........] 120/1000  loss 2.3456  lr 3.00e-04  12345 tok/s  ETA 0:01:13
// Under mpirun no bar unless EMBER_PROGRESS=bar asks for it (see wants_bar).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace ember::apps {

struct StepReport {
  int64_t step = 0, steps = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, ms_per_step = 0, mfu = 0, eta_s = 0;
  bool has_val = false;  // a validation result came with this step
  double val_loss = 0, val_bits = 0;
  bool val_per_byte = true;  // val_bits are bits per byte (else per token: no tokenizer)
  // ember align and reward: the held-out reward accuracy, shown instead of val_bits.
  std::optional<double> val_accuracy;
  // --pp: the step's idle share of the pipeline (apps/train/pipeline_run.h), shown as "bubble".
  std::optional<double> idle;
  // ember rl: the step's mean reward; the held-out greedy completions' (val_reward, val_exact).
  std::optional<double> reward, val_reward, val_exact;
};

// h:mm:ss, rounded to the second (negative: 0).
std::string format_eta(double seconds);
// The plain progress line, without the newline.
std::string format_step_line(const StepReport& r);
// The terminal bar, cut to at most `width` characters.
std::string format_step_bar(const StepReport& r, int width);

class TrainProgress {
 public:
  // terminal: draw the bar (see wants_bar); out is where both go.
  TrainProgress(std::FILE* out, bool terminal);
  // Erases the bar, also when an error ends the run (its message then starts a clean line).
  ~TrainProgress() { clear(); }
  TrainProgress(const TrainProgress&) = delete;
  TrainProgress& operator=(const TrainProgress&) = delete;
  // Whether stdout gets the bar. EMBER_PROGRESS=plain: never; EMBER_PROGRESS=bar: when
  // stdout is a terminal; unset: when stdout is a terminal whose TERM is not "dumb" and the
  // process was not started by mpirun (Open MPI gives every rank a pseudo-terminal even when
  // mpirun's own output goes to a file, and tells the rank nothing of it). Another value
  // of EMBER_PROGRESS is an Error.
  static bool wants_bar();
  // The Error of wants_bar for a bad EMBER_PROGRESS, raised before a run does any work.
  static void check_setting();
  // One finished step: the plain line when log_line, and the bar on a terminal
  // (redrawn at most 10 times a second, always on a log line and the last step).
  void step(const StepReport& r, bool log_line);
  // Erases the bar so that other output starts on a clean line.
  void clear();

 private:
  std::FILE* out_;
  bool terminal_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace ember::apps
