// Data preparation for `ember train` (see data_prep.h).
#include "data/tokenizer/stored_tokenizer.h"
#include "apps/train/data_prep.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/common/model_io.h"
#include "core/io/read_file.h"
#include "data/corpus.h"
#include "data/corpus_encoder.h"
#include "data/token_shard.h"

namespace ember::apps {
namespace fs = std::filesystem;

bool is_shard_spec(const std::string& spec) {
  std::vector<std::string> files;
  try {
    files = data::list_shards(spec);
  } catch (const Error&) {
    return false;
  }
  if (files.empty()) return false;
  // Shards by name (.bin: a bad header is then reported by the shard reader) or by magic.
  for (const std::string& f : files) {
    if (f.size() >= 4 && f.compare(f.size() - 4, 4, ".bin") == 0) continue;
    std::ifstream in(f, std::ios::binary);
    int32_t magic = 0;
    in.read(reinterpret_cast<char*>(&magic), sizeof magic);
    if (!in || magic != data::kShardMagic) return false;
  }
  return true;
}

std::string find_shard_tokenizer(const std::string& spec) {
  std::vector<std::string> files;
  try {
    files = data::list_shards(spec);
  } catch (const Error&) {
    return "";
  }
  if (files.empty()) return "";
  const fs::path folder = fs::path(files.front()).parent_path();
  std::error_code ec;
  for (const fs::path& dir : {folder, folder.parent_path()}) {
    const fs::path candidate = (dir.empty() ? fs::path(".") : dir) / kShardTokenizerName;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    if (dir.empty()) break;
  }
  return "";
}

TrainingTokenizer training_tokenizer(const std::string& tokenizer_file, const std::string& checkpoint_json,
                                     const nn::ModelConfig& cfg, const std::string& data) {
  TrainingTokenizer t;
  const std::string beside = is_shard_spec(data) ? find_shard_tokenizer(data) : "";
  if (!tokenizer_file.empty()) {
    t.tokenizer = data::Tokenizer::load(tokenizer_file);
    t.source = "--tokenizer " + tokenizer_file;
  } else if (!checkpoint_json.empty()) {
    t.tokenizer = data::Tokenizer::from_json(checkpoint_json);
    t.source = "the checkpoint's tokenizer";
    if (!beside.empty()) {
      EMBER_CHECK(data::Tokenizer::load(beside).to_json() == t.tokenizer->to_json(), "--data ", data,
                  ": the shards' tokenizer ", beside,
                  " differs from the checkpoint's; give --tokenizer FILE with the one the shards were encoded with");
    }
  } else if (!beside.empty()) {
    t.tokenizer = data::Tokenizer::load(beside);
    t.source = beside + " (beside the shards)";
  } else if (cfg.vocab_size >= 256) {
    t.tokenizer = data::byte_tokenizer(cfg.vocab_size);
    t.source = "the byte tokenizer";
  }
  if (t.tokenizer) {
    EMBER_CHECK(static_cast<int64_t>(t.tokenizer->vocab_size()) <= cfg.vocab_size, t.source, ": ",
                t.tokenizer->vocab_size(), " tokens do not fit the model's vocab_size ", cfg.vocab_size);
  }
  return t;
}

void check_tokenizer_covers(const TrainingTokenizer& t, uint32_t max_id, const std::string& data) {
  if (!t.tokenizer || max_id < t.tokenizer->vocab_size()) return;
  throw Error(detail::concat("--data ", data, ": token id ", max_id, " is outside ", t.source, " (",
                             t.tokenizer->vocab_size(),
                             " tokens): the shards were encoded with another tokenizer; give it with --tokenizer FILE "
                             "(`ember tokenize --encode` writes it beside the shards as ",
                             kShardTokenizerName, ")"));
}

namespace {

// Raw bytes of the corpus files, in order, as tokens; the last val_fraction
// of them (the held-out tail) become the validation shard.
PreparedData prepare_bytes(const std::vector<std::string>& files, const std::string& dir,
                           double val_fraction, bool need_val) {
  std::vector<uint32_t> tokens;
  for (const std::string& f : files) {
    for (unsigned char c : read_file(f, "corpus file")) tokens.push_back(c);
  }
  EMBER_CHECK(!tokens.empty(), "the corpus is empty: ", files.size(), " file(s) and no text");
  PreparedData out;
  out.from_text = true;
  out.text_bytes = tokens.size();
  const size_t n_val = need_val ? static_cast<size_t>(static_cast<double>(tokens.size()) * val_fraction) : 0;
  const size_t n_train = tokens.size() - n_val;
  out.train = (fs::path(dir) / "train_000000.bin").string();
  data::write_shard(out.train, std::span<const uint32_t>(tokens.data(), n_train), 256);
  out.train_tokens = n_train;
  if (n_val > 0) {
    out.val = (fs::path(dir) / "val_000000.bin").string();
    data::write_shard(out.val, std::span<const uint32_t>(tokens.data() + n_train, n_val), 256);
    out.val_tokens = n_val;
  }
  return out;
}

}  // namespace

PreparedData prepare_data(const std::string& data, const std::string& val_data,
                          const data::Tokenizer& tokenizer, const std::string& out_dir,
                          double val_fraction) {
  EMBER_CHECK(!data.empty(), "--data: no training data given");
  EMBER_CHECK(fs::exists(data) || data.find_first_of("*?[") != std::string::npos, "--data: ", data,
              ": no such file or directory");
  PreparedData out;
  // The folder `ember tokenize --encode --out DIR` writes holds its shards under train/ and val/
  // beside tokenizer.json; read as text, it would train on the tokenizer's JSON.
  std::error_code ec;
  EMBER_CHECK(!(fs::is_directory(data, ec) && is_shard_spec((fs::path(data) / "train").string())),
              "--data: ", data, " holds token shards under train/: give --data ",
              (fs::path(data) / "train").string(), " (and --val-data ", (fs::path(data) / "val").string(),
              " when it exists)");
  if (is_shard_spec(data)) {
    out.train = data;
  } else {
    const std::vector<std::string> files = data::list_corpus_files({data});
    const std::string dir = (fs::path(out_dir) / "data").string();
    fs::create_directories(dir);
    const bool need_val = val_data.empty();
    if (!tokenizer.find_special(data::kEndOfText) && tokenizer.vocab_size() == 256) {  // the plain byte tokenizer
      out = prepare_bytes(files, dir, val_fraction, need_val);
    } else {
      data::CorpusEncodeOptions opt;
      opt.out_dir = dir;
      opt.val_fraction = need_val ? val_fraction : 0.0;
      opt.corpus.separator_line = std::string(1, '%');  // fortune files; harmless elsewhere
      const data::CorpusEncodeResult r = data::encode_corpus(tokenizer, files, opt);
      EMBER_CHECK(r.train_tokens > 0, "--data: ", data, ": the corpus is empty");
      out.from_text = true;
      out.text_bytes = r.bytes;
      out.train = (fs::path(dir) / "train").string();
      out.train_tokens = r.train_tokens;
      if (!r.val_shards.empty()) {
        out.val = (fs::path(dir) / "val").string();
        out.val_tokens = r.val_tokens;
      }
    }
    tokenizer.save((fs::path(dir) / kShardTokenizerName).string());  // the shards' tokenizer travels with them
  }
  if (!val_data.empty()) {
    EMBER_CHECK(is_shard_spec(val_data), "--val-data: ", val_data,
                ": expected llm.c token shards (a .bin file, folder or glob)");
    out.val = val_data;
  }
  return out;
}

}  // namespace ember::apps
