// core/io/read_file: the whole content of a file, byte for byte, and one
// Error line naming the file and its role when it is missing or a folder.
#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "core/io/read_file.h"
#include "temp_dir.h"

using ember::read_file;
using ember::testing::TempDir;

TEST_CASE("read_file returns every byte of the file", "[io]") {
  TempDir dir("read_file");
  std::string bytes;
  for (int i = 0; i < 200000; ++i) bytes.push_back(static_cast<char>((i * 7919) % 256));  // NULs, > 64 KiB buffer
  dir.write("blob.bin", bytes);
  CHECK(read_file(dir / "blob.bin", "blob") == bytes);
  dir.write("empty.txt", "");
  CHECK(read_file(dir / "empty.txt", "text file").empty());
  dir.write("line.txt", "one line\r\nno newline at the end");
  CHECK(read_file(dir / "line.txt", "text file") == "one line\r\nno newline at the end");
}

TEST_CASE("read_file reads files whose size stat reports as 0", "[io]") {
  const std::string status = read_file("/proc/self/status", "status file");
  CHECK(status.find("Name:") == 0);
}

TEST_CASE("read_file: a missing file or a folder is one line naming the file and its role", "[io]") {
  TempDir dir("read_file_errors");
  const std::string missing = dir / "nope.json";
  CHECK_THROWS_WITH(read_file(missing, "model config file"),
                    missing + ": cannot open the model config file: No such file or directory");
  CHECK_THROWS_WITH(read_file(dir.path.string(), "tokenizer.json file"),
                    dir.path.string() + ": is a folder, not the tokenizer.json file");
  const std::string under_file = dir / "blob/x";
  dir.write("blob", "x");
  CHECK_THROWS_WITH(read_file(under_file, "prompt file"),
                    under_file + ": cannot open the prompt file: Not a directory");
}

TEST_CASE("read_file stops past its bound with one line, also on an endless device", "[io]") {
  TempDir dir("read_file_bound");
  dir.write("four.txt", "abcd");
  CHECK(read_file(dir / "four.txt", "prompt file", 4) == "abcd");
  CHECK_THROWS_WITH(read_file(dir / "four.txt", "prompt file", 3),
                    dir / "four.txt" + ": the prompt file is larger than 0 MiB, more than such a file holds "
                                       "(an endless stream or device?)");
  CHECK_THROWS_WITH(read_file("/dev/zero", "model config file", uint64_t{1} << 20),
                    "/dev/zero: the model config file is larger than 1 MiB, more than such a file holds "
                    "(an endless stream or device?)");
}
