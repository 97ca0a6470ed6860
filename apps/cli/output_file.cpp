// require_replaceable: an existing output is replaced only when it is of the
// kind being written (see output_file.h).
#include "apps/cli/output_file.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace ember::apps {

void require_replaceable(const std::string& option, const std::string& path, const std::string& kind,
                         std::initializer_list<std::string_view> starts) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return;
  EMBER_CHECK(!fs::is_directory(st), option, " ", path, ": is a folder; give the file to write");
  std::ifstream in(path, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos && head.size() < 256) return;  // empty (or only white space): nothing to lose
  const std::string_view text = std::string_view(head).substr(first == std::string::npos ? head.size() : first);
  for (std::string_view s : starts) {
    if (text.starts_with(s)) return;
  }
  throw Error(option + " " + path + ": exists and is not " + kind + " file; not replaced (give a new file name)");
}

}  // namespace ember::apps
