// One run per folder: an exclusive flock on OUT/.lock, held while the run
// lasts (released by the kernel however the process ends, kill -9 too). A
// second `ember train` or `ember finetune` on the same --out refuses at once, naming the folder
// and the holder's pid.
#pragma once
#include <optional>
#include <string>

namespace ember::apps {

class RunLock {
 public:
  // Creates OUT/.lock if needed and locks it; an Error when another process holds it.
  explicit RunLock(const std::string& out_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// Whether a process holds OUT/.lock now: its pid as written in the file ("" when it has not
// written it yet), or nullopt when no process holds it (or there is no lock file). Probes with
// a shared lock taken and dropped at once; creates nothing.
std::optional<std::string> run_lock_holder(const std::string& out_dir);

}  // namespace ember::apps
