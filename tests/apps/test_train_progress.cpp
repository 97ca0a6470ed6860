// `ember train` progress: the plain line keeps its exact format (scripts parse
// it), the terminal bar fits its width, and the printer writes plain lines
// only to a non-terminal, a bar redrawn with \r to a terminal; EMBER_PROGRESS.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "apps/train/step_progress.h"

using namespace ember::apps;

namespace {

StepReport report(int64_t step) {
  StepReport r;
  r.step = step;
  r.steps = 100;
  r.loss = 2.34567;
  r.lr = 3e-4;
  r.grad_norm = 0.5;
  r.tokens_per_s = 12345.6;
  r.ms_per_step = 83.2;
  r.mfu = 0.125;
  r.eta_s = 73;
  return r;
}

// Everything written to a temporary file by fn.
template <class Fn>
std::string written(Fn fn) {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  fn(f);
  std::fflush(f);
  std::string text(static_cast<size_t>(std::ftell(f)), '\0');
  std::rewind(f);
  REQUIRE(std::fread(text.data(), 1, text.size(), f) == text.size());
  std::fclose(f);
  return text;
}

}  // namespace

TEST_CASE("format_eta is h:mm:ss", "[progress]") {
  CHECK(format_eta(3725.4) == "1:02:05");
  CHECK(format_eta(59.6) == "0:01:00");
  CHECK(format_eta(-3) == "0:00:00");
}

TEST_CASE("the plain progress line keeps its format", "[progress]") {
  StepReport r = report(12);
  CHECK(format_step_line(r) ==
        "step     12/100 | loss 2.3457 | lr 3.00e-04 | norm 0.500 | 12346 tok/s | 83 ms | MFU "
        "12.5% | ETA 0:01:13");
  r.has_val = true;
  r.val_loss = 2.5;
  r.val_bits = 1.25;
  CHECK(format_step_line(r).ends_with("ETA 0:01:13 | val 2.5000 (1.250 bpb)"));
  r.val_per_byte = false;
  CHECK(format_step_line(r).ends_with(" | val 2.5000 (1.250 bits/token)"));
  // ember align and reward: the held-out reward accuracy, its own field (no bits measured).
  r.val_accuracy = 0.75;
  CHECK(format_step_line(r).ends_with(" | val 2.5000 (reward accuracy 0.750)"));
  // --pp: the pipeline's idle share before the validation.
  r.idle = 0.1134;
  CHECK(format_step_line(r).ends_with("ETA 0:01:13 | bubble 11.3% | val 2.5000 (reward accuracy 0.750)"));
}

TEST_CASE("the terminal bar shows step/total, loss, lr, tok/s and ETA within the width",
          "[progress]") {
  CHECK(format_step_bar(report(50), 200) ==
        "[#####.....] 50/100  loss 2.3457  lr 3.00e-04  12346 tok/s  ETA 0:01:13");
  CHECK(format_step_bar(report(100), 200).starts_with("[##########] 100/100"));
  CHECK(format_step_bar(report(1000), 200)
            .starts_with("[##########] 1000/100"));  // past the end: a full bar
  CHECK(format_step_bar(report(50), 20) == "[#####.....] 50/100 ");
  CHECK(format_step_bar(report(100), 79).size() <= 79);
}

TEST_CASE("without a terminal only the log steps print, as plain lines", "[progress]") {
  const std::string text = written([](std::FILE* f) {
    TrainProgress p(f, /*terminal=*/false);
    p.step(report(1), true);
    p.step(report(2), false);
    p.step(report(3), true);
    p.clear();
  });
  CHECK(text == format_step_line(report(1)) + "\n" + format_step_line(report(3)) + "\n");
}

TEST_CASE("on a terminal the bar is redrawn in place and log lines scroll above it", "[progress]") {
  const std::string text = written([](std::FILE* f) {
    TrainProgress p(f, /*terminal=*/true);
    p.step(report(1), false);  // first draw: the bar
    p.step(report(2), true);   // erase the bar, the line, the bar again
    p.clear();
  });
  const std::string bar1 = format_step_bar(report(1), 79), bar2 = format_step_bar(report(2), 79);
  CHECK(text == "\r" + bar1 + "\033[K" + "\r\033[K" + format_step_line(report(2)) + "\n" + "\r" +
                    bar2 + "\033[K" + "\r\033[K");
}

TEST_CASE("EMBER_PROGRESS takes bar or plain, and plain never draws the bar", "[progress]") {
  const char* old = std::getenv("EMBER_PROGRESS");
  const std::string saved = old ? old : "";
  for (const char* ok : {"bar", "plain", ""}) {
    setenv("EMBER_PROGRESS", ok, 1);
    CHECK_NOTHROW(TrainProgress::check_setting());
  }
  setenv("EMBER_PROGRESS", "plain", 1);
  CHECK_FALSE(TrainProgress::wants_bar());
  setenv("EMBER_PROGRESS", "tty", 1);
  CHECK_THROWS_WITH(TrainProgress::check_setting(),
                    "EMBER_PROGRESS must be bar or plain (or unset), got 'tty'");
  CHECK_THROWS(TrainProgress::wants_bar());
  old ? setenv("EMBER_PROGRESS", saved.c_str(), 1) : unsetenv("EMBER_PROGRESS");
}
