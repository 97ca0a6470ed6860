// `ember export` and `ember import` (Hugging Face folders, docs/cli.md): import never
// overwrites a file and refuses a model.safetensors holding a non-finite weight.
#include <catch2/catch.hpp>
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
