// Writes a whole file atomically: a temporary file in the same directory,
// flushed to disk, then renamed over the target. Errors name the path.
#pragma once
#include <string>
#include <string_view>

namespace ember {

void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace ember
