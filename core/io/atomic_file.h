// Writes a whole file atomically: a temporary file in the same directory,
// flushed to disk, then renamed over the target and the folder flushed, so a
// crash leaves the old file or the new one. Errors name the path; a failed
// write removes its temporary, and the temporaries <path>.tmp<pid> that writers
// killed mid-write left (their process gone) go before the next write of path.
// Every file ember writes whole goes through here (files written by libhdf5 or
// a shard writer commit their temporary with commit_temporary_file or
// commit_new_file).
#pragma once
#include <string>
#include <string_view>

namespace ember {

void write_file_atomically(const std::string& path, std::string_view content);

// The last step of every atomic write: fsyncs the complete temporary `tmp`,
// renames it to `path` and fsyncs the folder. On failure `tmp` is removed and
// an Error "cannot write '<path>': <reason>" is thrown.
void commit_temporary_file(const std::string& tmp, const std::string& path);

// commit_temporary_file that never replaces a file: the rename is
// RENAME_NOREPLACE (link + unlink where the file system lacks it). Returns
// false, with `tmp` removed, when `path` exists; other failures as above.
bool commit_new_file(const std::string& tmp, const std::string& path);

// fsync of the folder holding `path`, so that a rename into it is on disk too
// (best effort: some file systems refuse fsync on a folder).
void fsync_parent_folder(const std::string& path);

// Removes what writers killed before they finished left beside `path`: files
// named <name of path><separator><pid> whose process no longer runs (a live
// writer's temporary stays). Best effort; returns how many went.
int remove_dead_temporaries(const std::string& path, std::string_view separator);

}  // namespace ember
