// `ember export` and `ember import` (Hugging Face folders, docs/cli.md): import never
// overwrites a file and refuses a model.safetensors holding a non-finite weight.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.h"
#include "cli_testing.h"
#include "nn/checkpoint_file.h"

namespace fs = std::filesystem;

namespace {

using Run = ember::testing::CliRun;
using ember::testing::check_plain_message;
using ember::testing::read_text;
using ember::testing::run_ember;
using ember::testing::TempDir;
using ember::testing::tiny_config;
using ember::testing::zero_checkpoint;

}  // namespace

TEST_CASE("import never overwrites a file and refuses non-finite weights", "[cli][hostile]") {
  TempDir dir("cli_hostile_import");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  REQUIRE(run_ember("export --checkpoint " + dir / "zero.h5" + " --out " + dir / "hf").code == 0);
  dir.write("precious.h5", "a checkpoint of another run");
  const Run over = run_ember("import --from " + dir / "hf" + " --out " + dir / "precious.h5");
  CHECK(over.code == 1);
  check_plain_message(over.err);
  CHECK(over.err.find("--out " + dir / "precious.h5") != std::string::npos);
  CHECK(read_text(dir.path / "precious.h5") == "a checkpoint of another run");
  // A NaN in model.safetensors (its first tensor's first float, right after the header).
  const std::string st = dir / "hf/model.safetensors";
  std::string bytes = read_text(st);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const float nan = NAN;
  std::memcpy(bytes.data() + 8 + header, &nan, 4);
  std::ofstream(st, std::ios::binary | std::ios::trunc) << bytes;
  const Run r = run_ember("import --from " + dir / "hf" + " --out " + dir / "nan.h5");
  CHECK(r.code == 1);
  check_plain_message(r.err);
  CHECK(r.err.find("non-finite") != std::string::npos);
  CHECK(!fs::exists(dir.path / "nan.h5"));
}

TEST_CASE("export --format gguf writes a new file, never replaces one and refuses in one line", "[cli][gguf]") {
  TempDir dir("cli_gguf_export");
  ember::nn::write_checkpoint(dir / "zero.h5", zero_checkpoint(tiny_config(257)));
  // What an export killed before it finished left (its process gone: a child that has ended),
  // and a temporary of a writer still running (this test): the export removes only the first.
  const pid_t ended = ::fork();
  if (ended == 0) ::_exit(0);
  REQUIRE(ended > 0);
  ::waitpid(ended, nullptr, 0);
  const std::string dead_tmp = dir / ("m.gguf.tmp." + std::to_string(ended));
  const std::string live_tmp = dir / ("m.gguf.tmp." + std::to_string(::getpid()));
  std::ofstream(dead_tmp) << "partial";
  std::ofstream(live_tmp) << "partial";
  const Run ok = run_ember("export --checkpoint " + dir / "zero.h5" + " --format gguf --weights int8 --out " +
                           dir / "m.gguf");
  REQUIRE(ok.code == 0);
  CHECK(ok.out.find("llama") != std::string::npos);
  CHECK(ok.out.find("int8") != std::string::npos);
  const std::string bytes = read_text(dir / "m.gguf");
  CHECK(bytes.substr(0, 4) == "GGUF");
  CHECK(!fs::exists(dead_tmp));
  CHECK(fs::exists(live_tmp));
  const Run again = run_ember("export --checkpoint " + dir / "zero.h5" + " --format gguf --out " + dir / "m.gguf");
  CHECK(again.code == 1);
  check_plain_message(again.err);
  CHECK(again.err.find(dir / "m.gguf") != std::string::npos);
  CHECK(read_text(dir / "m.gguf") == bytes);
  const Run hf = run_ember("export --checkpoint " + dir / "zero.h5" + " --weights bf16 --out " + dir / "hf");
  CHECK(hf.code == 1);
  check_plain_message(hf.err);
  CHECK(hf.err.find("--weights") != std::string::npos);
  std::string capped = tiny_config(257);
  capped.insert(capped.rfind('}'), R"(, "final_softcap": 30)");
  ember::nn::write_checkpoint(dir / "capped.h5", zero_checkpoint(capped));
  const Run refused = run_ember("export --checkpoint " + dir / "capped.h5" + " --format gguf --out " + dir / "c.gguf");
  CHECK(refused.code == 1);
  check_plain_message(refused.err);
  CHECK(refused.err.find("final_softcap") != std::string::npos);
  CHECK(!fs::exists(dir.path / "c.gguf"));
}
