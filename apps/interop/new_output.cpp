// require_new_output: export and import never replace an existing file or write into a
// folder that holds files (apps/interop/new_output.h).
#include "apps/interop/new_output.h"

#include <filesystem>

#include "core/error.h"

namespace ember::apps {

void require_new_output(const std::string& command, const std::string& option, const std::string& path,
                        OutputKind kind) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(path, ec);
  if (!fs::exists(link)) return;  // nothing there (a dangling symbolic link counts as something)
  const bool folder = fs::is_directory(path, ec);
  if (kind == OutputKind::File) {
    EMBER_CHECK(!folder, option, " ", path, ": is a folder; give the file to write");
    throw Error(option + " " + path + ": the file exists; give a path that does not (" + command +
                " never overwrites a file)");
  }
  EMBER_CHECK(folder, option, " ", path, ": is a file; give a new or empty folder (", command,
              " never overwrites a file)");
  const bool empty = fs::is_empty(path, ec);
  EMBER_CHECK(!ec, option, " ", path, ": cannot read the folder (", ec.message(), ")");
  EMBER_CHECK(empty, option, " ", path, ": the folder exists and is not empty; give a new or empty folder (",
              command, " never replaces files in one)");
}

void create_output_folder(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(path, ec);
  EMBER_CHECK(!ec && fs::is_directory(path), option, " ", path, ": cannot create the folder",
              ec ? " (" + ec.message() + ")" : std::string());
}

}  // namespace ember::apps
