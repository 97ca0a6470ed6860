// The files of a run folder: checkpoints OUT/step_<8 digits>.h5, the
// OUT/latest pointer (name of the newest complete checkpoint), pruning by
// --keep / --keep-every, and finding the checkpoint to resume from.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nn/checkpoint_file.h"

namespace ember::apps {

std::string checkpoint_name(int64_t step);  // "step_00000123.h5"
// Points OUT/latest at name, atomically.
void write_latest(const std::string& out_dir, const std::string& name);
// Checkpoints in the folder, newest step first.
std::vector<std::string> list_checkpoints(const std::string& out_dir);
// Deletes all but the newest `keep` (0: keeps all), sparing steps divisible by
// keep_every and the checkpoint `latest` names.
void prune_checkpoints(const std::string& out_dir, int64_t keep, int64_t keep_every);
// The newest checkpoint that opens, passes its checksum and reads completely;
// one that fails in any way (truncated, corrupt, unreadable) is skipped with a
// warning on stderr. An Error when none is usable (naming the process that holds the folder's
// lock, when one does: a run that has not saved yet). Changes no file.
struct ResumePoint {
  std::string path;
  nn::Checkpoint checkpoint;  // as read_checkpoint(path, with_optim, !optim_tensors): moments stay in the file
};
ResumePoint find_resume_point(const std::string& dir);
// Deletes the temporary files ember's writers leave in a run folder when a
// process dies mid-write (.step_*.h5.tmp, .latest.tmp, shard .tmp files in
// OUT/data, ...), and nothing else; returns how many. Call it only while no
// other process writes to the folder (after taking the run's lock).
int remove_stale_temporaries(const std::string& out_dir);
// Refuses (one line naming the newest one) when out_dir holds checkpoints and
// is not the folder being resumed (resume_dir, "" for a new run): a run there
// would overwrite some of another run's checkpoints and leave the rest newer
// than its own for a later --resume to pick up.
void check_no_other_run(const std::string& out_dir, const std::string& resume_dir);
// Fails with a clear error when the folder cannot be created or written.
void ensure_writable_dir(const std::string& dir, const char* option);

}  // namespace ember::apps
