// tiny_train_args: a tiny model config and a small text corpus written into a test's folder,
// and the arguments of a short `ember train` of that model on that corpus (the CLI tests').
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "temp_dir.h"

namespace ember::testing {

// Writes dir/tiny.json and (once) dir/corpus.txt; returns `train ...` into dir/OUT with batch 2 x 16
// tokens, one warmup step and one validation batch; callers add --steps, --lr, --log-every.
inline std::string tiny_train_args(const TempDir& dir, const std::string& out) {
  dir.write("tiny.json", R"({"vocab_size": 256, "d_model": 16, "n_layers": 1, "n_heads": 2,
    "ffn_hidden": 32, "max_seq_len": 32})");
  if (!std::filesystem::exists(dir / "corpus.txt")) {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 200; ++i) corpus << "line " << i << ": the quick brown fox jumps over the lazy dog.\n";
  }
  return "train --config " + (dir / "tiny.json") + " --data " + (dir / "corpus.txt") + " --out " + (dir / out) +
         " --batch-size 2 --seq-len 16 --warmup 1 --eval-batches 1";
}

}  // namespace ember::testing
