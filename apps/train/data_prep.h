// Turns `--data` into token shards: an llm.c shard, a folder or glob of
// shards is used as it is; a text file or folder of text files is tokenised
// into OUT/data/train_*.bin (and OUT/data/val_*.bin from a held-out tail when
// no --val-data is given). The byte tokenizer (vocab 256) keeps the raw bytes
// of the files; a tokenizer with <|endoftext|> separates documents by it.
// The tokenizer of a run's shards: `ember tokenize --encode` writes it beside them
// as tokenizer.json; training_tokenizer() finds it there.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "data/tokenizer/tokenizer.h"
#include "nn/config.h"

namespace ember::apps {

struct PreparedData {
  std::string train;  // dataset spec for data::TokenDataset
  std::string val;    // "" when there is no validation data
  bool from_text = false;
  uint64_t text_bytes = 0;  // bytes of the text tokenised (0 for shards)
  uint64_t train_tokens = 0, val_tokens = 0;
};

// True when every file the spec names is an llm.c shard (by its magic number).
bool is_shard_spec(const std::string& spec);

// The file name of the tokenizer that travels with token shards.
inline constexpr const char* kShardTokenizerName = "tokenizer.json";

// tokenizer.json in the folder of the shards `spec` names, or in its parent
// (OUT/train/*.bin of `ember tokenize --encode --out OUT`); "" when neither exists.
std::string find_shard_tokenizer(const std::string& spec);

struct TrainingTokenizer {
  std::optional<data::Tokenizer> tokenizer;  // none: ids are counted as tokens only
  std::string source;                  // where it came from, for messages
};
// The tokenizer of a training run, the first of: --tokenizer FILE; the
// checkpoint's (checkpoint_json, from --resume or --init-from); tokenizer.json
// beside token shards --data; the byte tokenizer when the vocabulary holds the
// bytes (>= 256); none. A shard folder's tokenizer that differs from the
// checkpoint's is an Error (give --tokenizer to choose).
TrainingTokenizer training_tokenizer(const std::string& tokenizer_file, const std::string& checkpoint_json,
                                     const nn::ModelConfig& cfg, const std::string& data);
// An Error (asking for --tokenizer) when token ids up to max_id of --data lie
// outside the run's tokenizer: the shards were made with another one.
void check_tokenizer_covers(const TrainingTokenizer& t, uint32_t max_id, const std::string& data);

PreparedData prepare_data(const std::string& data, const std::string& val_data,
                          const data::Tokenizer& tokenizer, const std::string& out_dir,
                          double val_fraction);

}  // namespace ember::apps
