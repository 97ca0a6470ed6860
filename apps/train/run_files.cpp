// Run-folder bookkeeping (see run_files.h).
#include "apps/train/run_files.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "nn/checkpoint_file.h"
#include "core/error.h"
#include "core/io/atomic_file.h"
#include "apps/train/run_lock.h"

namespace ember::apps {
namespace fs = std::filesystem;

std::string checkpoint_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld.h5", static_cast<long long>(step));
  return buf;
}

void write_latest(const std::string& out_dir, const std::string& name) {
  write_file_atomically((fs::path(out_dir) / "latest").string(), name + "\n");
}

// The name OUT/latest points at ("" when there is none).
static std::string latest_name(const std::string& out_dir) {
  std::ifstream latest(fs::path(out_dir) / "latest");
  std::string pointed;
  latest >> pointed;
  return pointed;
}

static int64_t step_of(const std::string& name) {
  static const std::regex pattern(R"(step_(\d{8,})\.h5)");
  std::smatch m;
  return std::regex_match(name, m, pattern) ? std::stoll(m[1]) : -1;
}

std::vector<std::string> list_checkpoints(const std::string& out_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    const int64_t step = step_of(name);
    if (step >= 0 && e.is_regular_file()) found.emplace_back(step, name);
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> names;
  for (auto& [step, name] : found) names.push_back(name);
  return names;
}

void prune_checkpoints(const std::string& out_dir, int64_t keep, int64_t keep_every) {
  if (keep <= 0) return;
  const auto names = list_checkpoints(out_dir);
  const std::string pointed = latest_name(out_dir);
  for (size_t i = static_cast<size_t>(keep); i < names.size(); ++i) {
    const int64_t step = step_of(names[i]);
    if (keep_every > 0 && step % keep_every == 0) continue;
    // A newer (corrupt) checkpoint left by a resumed run can rank above the
    // one just written: `latest`'s checkpoint is never the one pruned.
    if (names[i] == pointed) continue;
    std::error_code ec;
    fs::remove(fs::path(out_dir) / names[i], ec);
  }
}

ResumePoint find_resume_point(const std::string& dir) {
  EMBER_CHECK(fs::is_directory(dir), "--resume: ", dir, " is not a run folder");
  std::vector<std::string> candidates;
  const std::string pointed = latest_name(dir);
  if (step_of(pointed) >= 0) candidates.push_back(pointed);
  for (const std::string& n : list_checkpoints(dir)) {
    if (n != pointed) candidates.push_back(n);
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const std::string& a, const std::string& b) { return step_of(a) > step_of(b); });
  for (const std::string& name : candidates) {
    const std::string path = (fs::path(dir) / name).string();
    try {
      // Verifies the checksum and reads every dataset, the moments one at a time.
      nn::Checkpoint c = nn::read_checkpoint(path, /*with_optim=*/true, /*optim_tensors=*/false);
      const nn::CheckpointOptimReader moments(path);
      for (const auto& [name, t] : c.model) {
        for (const char* m : {"/exp_avg", "/exp_avg_sq"}) moments(name + m);
      }
      return {path, std::move(c)};
    } catch (const std::exception& e) {  // any failure (bad_alloc, json, filesystem): the next one
      const std::string why = e.what();  // names the file, mostly
      std::fprintf(stderr, "ember: warning: skipping %s\n", (why.starts_with(path) ? why : path + ": " + why).c_str());
    }
  }
  // The run in that folder may still be on its way to its first checkpoint.
  if (const std::optional<std::string> pid = run_lock_holder(dir)) {
    throw Error(detail::concat("--resume: another ember process",
                               pid->empty() ? std::string() : " (pid " + *pid + ")", " is running in ",
                               dir, " and has not saved a checkpoint yet; wait for its first "
                               "checkpoint (--save-every) or for it to end"));
  }
  throw Error("--resume: no usable checkpoint in " + dir);
}

int remove_stale_temporaries(const std::string& out_dir) {
  // The temporaries of write_checkpoint, write_latest (old and new names),
  // ensure_writable_dir, the loss plot and profile.json in OUT; in OUT/data those of the
  // byte shards and of tokenizer.json (write_file_atomically: <name>.tmp<pid>);
  // in OUT/data/train and OUT/data/val those of the BPE shards (corpus_encoder).
  static const std::regex in_out(R"(\.step_\d{8,}\.h5\.tmp|\.latest\.tmp|latest\.tmp\d+|\.ember_write_test|\.loss\.svg\.tmp|(loss\.svg|profile\.json|ref_logps\.json)\.tmp\d+)");
  static const std::regex in_data(R"((train|val)_\d{6,}\.bin\.tmp|tokenizer\.json\.tmp\d+)");
  static const std::regex in_split(R"((train|val)_\d{6,}\.bin\.tmp)");
  const fs::path out(out_dir);
  const std::pair<fs::path, const std::regex*> folders[] = {
      {out, &in_out}, {out / "data", &in_data}, {out / "data" / "train", &in_split}, {out / "data" / "val", &in_split}};
  int removed = 0;
  for (const auto& [folder, pattern] : folders) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
      std::error_code ignored;
      if (std::regex_match(e.path().filename().string(), *pattern) && e.is_regular_file(ignored) &&
          fs::remove(e.path(), ignored)) {
        ++removed;
      }
    }
  }
  return removed;
}

void check_no_other_run(const std::string& out_dir, const std::string& resume_dir) {
  std::error_code ec;
  if (!resume_dir.empty() && fs::equivalent(out_dir, resume_dir, ec)) return;
  const std::vector<std::string> names = list_checkpoints(out_dir);
  EMBER_CHECK(names.empty(), "--out ", out_dir, " already holds another run's checkpoints (newest ", names.front(),
              "); continue that run with --resume ", out_dir, ", or give another --out");
}

void ensure_writable_dir(const std::string& dir, const char* option) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  EMBER_CHECK(!ec && fs::is_directory(dir), option, ": cannot create folder ", dir,
              ec ? ": " + ec.message() : std::string());
  const fs::path probe = fs::path(dir) / ".ember_write_test";
  {
    std::ofstream f(probe);
    EMBER_CHECK(f.good(), option, ": folder ", dir, " is not writable");
  }
  fs::remove(probe, ec);
}

}  // namespace ember::apps
