// Turns `--data` into token shards: an llm.c shard, a folder or glob of
// shards is used as it is; a text file or folder of text files is tokenised
// into OUT/data/train_*.bin (and OUT/data/val_*.bin from a held-out tail when
// no --val-data is given). The byte tokenizer (vocab 256) keeps the raw bytes
// of the files; a tokenizer with <|endoftext|> separates documents by it.
#pragma once
#include <string>

#include "data/tokenizer.h"

namespace ember::apps {

struct PreparedData {
  std::string train;  // dataset spec for TokenDataset
  std::string val;    // "" when there is no validation data
  bool from_text = false;
  uint64_t text_bytes = 0;  // bytes of the text tokenised (0 for shards)
  uint64_t train_tokens = 0, val_tokens = 0;
};

// True when every file the spec names is an llm.c shard (by its magic number).
bool is_shard_spec(const std::string& spec);

PreparedData prepare_data(const std::string& data, const std::string& val_data,
                          const Tokenizer& tokenizer, const std::string& out_dir,
                          double val_fraction);

}  // namespace ember::apps
