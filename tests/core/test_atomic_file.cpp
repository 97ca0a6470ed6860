// core/io/atomic_file: write_file_atomically replaces a file whole and leaves no
// temporary (and removes what writers killed mid-write left); commit_temporary_file
// replaces, commit_new_file never does.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST_CASE("write_file_atomically removes the temporaries of killed writers of its path, not of live ones",
          "[io]") {
  TempDir dir("atomic_dead_writers");
  const pid_t ended = ::fork();  // a writer whose process is gone
  if (ended == 0) ::_exit(0);
  REQUIRE(ended > 0);
  ::waitpid(ended, nullptr, 0);
  const pid_t live = ::fork();  // one still running
  if (live == 0) {
    ::pause();
    ::_exit(0);
  }
  REQUIRE(live > 0);
  const std::string dead_tmp = "a.json.tmp" + std::to_string(ended), live_tmp = "a.json.tmp" + std::to_string(live),
                    other_tmp = "b.json.tmp" + std::to_string(ended);
  dir.write(dead_tmp, "partial");
  dir.write(live_tmp, "partial");
  dir.write(other_tmp, "partial");  // another file's
  ember::write_file_atomically(dir / "a.json", "{}\n");
  ::kill(live, SIGKILL);
  ::waitpid(live, nullptr, 0);
  CHECK_FALSE(fs::exists(dir.path / dead_tmp));
  CHECK(fs::exists(dir.path / live_tmp));
  CHECK(fs::exists(dir.path / other_tmp));
  CHECK(ember::read_file(dir / "a.json", "file") == "{}\n");
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
