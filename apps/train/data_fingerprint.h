// A fingerprint of a run's training data: for each file that --data (text or
// token shards) and --val-data name, its size and the CRC-32C of its bytes
// (all bytes up to 1 GiB of data in all; beyond, about 256 MiB read: 1 to 64
// evenly spread 1 MiB blocks per file and its last one).
// Stored in the checkpoint's run state; --resume compares it, and the ranks
// of a data-parallel run compare theirs at start.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace ember::apps {

// [{"file": path, "bytes": size, "hash": "8 hex digits"}, ...] for the files of data and val_data.
nlohmann::json data_fingerprint(const std::string& data, const std::string& val_data);
// "" when `now` equals `before`; else what changed, naming the first file
// ("corpus.txt: 1234 bytes, was 1200" / "a.bin: content changed" / "x.bin is new"). A file
// named by another path (relative and absolute, a link) with the same size and hash is no change.
std::string describe_data_change(const nlohmann::json& before, const nlohmann::json& now);

}  // namespace ember::apps
