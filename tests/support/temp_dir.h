// A fresh folder under the system temp directory for one test, removed with
// everything in it when the test ends; and whole-file reading for checks.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ember::testing {

class TempDir {
 public:
  // prefix names the test in the folder's name: <tmp>/ember_<prefix>_<pid>_<n>.
  explicit TempDir(const std::string& prefix = "test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("ember_" + prefix + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // Writes text (bytes as given) to a file in the folder.
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }

  std::filesystem::path path;
};

// The bytes of a file ("" when it cannot be read).
inline std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ember::testing
