// Stored paths of a run (see run_paths.h).
#include "apps/train/run_paths.h"

#include <filesystem>

namespace ember::apps {
namespace fs = std::filesystem;

std::string absolute_path(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

bool same_path(const std::string& a, const std::string& b) {
  if (a == b || absolute_path(a) == absolute_path(b)) return true;
  std::error_code ec;
  return fs::equivalent(a, b, ec) && !ec;
}

}  // namespace ember::apps
