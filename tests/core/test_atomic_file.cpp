// core/io/atomic_file: write_file_atomically replaces a file whole and leaves no
// temporary; commit_temporary_file replaces, commit_new_file never does.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/io/read_file.h"
#include "core/io/atomic_file.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using ember::testing::TempDir;

namespace {
int files_in(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}
}  // namespace

TEST_CASE("write_file_atomically replaces the file and leaves no temporary", "[io]") {
  TempDir dir("atomic_write");
  ember::write_file_atomically(dir / "a.json", "{\"v\": 1}\n");
  ember::write_file_atomically(dir / "a.json", "{\"v\": 2}\n");
  CHECK(ember::read_file(dir / "a.json", "file") == "{\"v\": 2}\n");
  CHECK(files_in(dir.path) == 1);
  CHECK_THROWS_WITH(ember::write_file_atomically(dir / "no/a.json", "x"),
                    Catch::StartsWith("cannot write '" + dir / "no/a.json" + "': "));
  CHECK(files_in(dir.path) == 1);
}

TEST_CASE("commit_temporary_file replaces, commit_new_file keeps an existing file and removes the temporary",
          "[io]") {
  TempDir dir("atomic_commit");
  dir.write("target", "old");
  dir.write(".target.tmp", "new");
  ember::commit_temporary_file(dir / ".target.tmp", dir / "target");
  CHECK(ember::read_file(dir / "target", "file") == "new");
  CHECK_FALSE(fs::exists(dir.path / ".target.tmp"));

  dir.write(".target.tmp", "newer");
  CHECK_FALSE(ember::commit_new_file(dir / ".target.tmp", dir / "target"));
  CHECK(ember::read_file(dir / "target", "file") == "new");
  CHECK_FALSE(fs::exists(dir.path / ".target.tmp"));

  dir.write(".fresh.tmp", "fresh");
  CHECK(ember::commit_new_file(dir / ".fresh.tmp", dir / "fresh"));
  CHECK(ember::read_file(dir / "fresh", "file") == "fresh");
  CHECK(files_in(dir.path) == 2);

  CHECK_THROWS_WITH(ember::commit_temporary_file(dir / ".gone.tmp", dir / "gone"),
                    "cannot write '" + dir / "gone" + "': No such file or directory");
}
