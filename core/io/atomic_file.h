// Writes a whole file atomically: a temporary file in the same directory,
// flushed to disk, then renamed over the target and the folder flushed, so a
// crash leaves the old file or the new one. Errors name the path; a failed
// write removes its temporary.
#pragma once
#include <string>
#include <string_view>

namespace ember {

void write_file_atomically(const std::string& path, std::string_view content);

// The last step of every atomic write: fsyncs the complete temporary `tmp`,
// renames it to `path` and fsyncs the folder. On failure `tmp` is removed and
// an Error "cannot write '<path>': <reason>" is thrown.
void commit_temporary_file(const std::string& tmp, const std::string& path);

// fsync of the folder holding `path`, so that a rename into it is on disk too
// (best effort: some file systems refuse fsync on a folder).
void fsync_parent_folder(const std::string& path);

}  // namespace ember
