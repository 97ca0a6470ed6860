// encode_corpus: read a batch of blocks, encode them in parallel (one
// EncodeCache per thread), append the ids in order to the split's shard writer.
#include "data/corpus_encoder.h"

#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "data/token_shard.h"

namespace ember::data {
namespace {

// One split (train or val): a shard writer that rolls over every shard_tokens.
class SplitWriter {
 public:
  SplitWriter(std::string dir, std::string name, size_t vocab, uint64_t shard_tokens)
      : dir_(std::move(dir)), name_(std::move(name)), vocab_(vocab), shard_tokens_(shard_tokens) {}

  void write(std::span<const uint32_t> ids) {
    while (!ids.empty()) {
      if (!writer_) open();
      const size_t take = static_cast<size_t>(std::min<uint64_t>(ids.size(), shard_tokens_ - writer_->count()));
      writer_->write(ids.first(take));
      ids = ids.subspan(take);
      tokens_ += take;
      if (writer_->count() == shard_tokens_) finish();
    }
  }
  void finish() {
    if (!writer_) return;
    writer_->close();
    files_.push_back(writer_->path());
    writer_.reset();
  }
  const std::vector<std::string>& files() const { return files_; }
  uint64_t tokens() const { return tokens_; }

 private:
  void open() {
    std::filesystem::create_directories(dir_);
    char name[64];
    std::snprintf(name, sizeof name, "%s_%06zu.bin", name_.c_str(), files_.size());
    writer_ = std::make_unique<ShardWriter>((std::filesystem::path(dir_) / name).string(), vocab_);
  }
  std::string dir_, name_;
  size_t vocab_;
  uint64_t shard_tokens_;
  std::unique_ptr<ShardWriter> writer_;
  std::vector<std::string> files_;
  uint64_t tokens_ = 0;
};

}  // namespace

CorpusEncodeResult encode_corpus(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                                 const CorpusEncodeOptions& options) {
  EMBER_CHECK(!options.out_dir.empty(), "encode_corpus: no output directory given");
  EMBER_CHECK(options.val_fraction >= 0 && options.val_fraction < 1,
              "encode_corpus: val fraction must be in [0, 1), got ", options.val_fraction);
  EMBER_CHECK(options.shard_tokens > 0 && options.shard_tokens <= INT32_MAX,
              "encode_corpus: shard size must be between 1 and 2^31 - 1 tokens, got ",
              options.shard_tokens);
  const auto found = tokenizer.find_special(kEndOfText);
  EMBER_CHECK(found, "encode_corpus: the tokenizer has no ", kEndOfText,
              " token to separate documents");
  const uint32_t eot = *found;
  const int n_threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  const auto start = std::chrono::steady_clock::now();

  CorpusReader reader(list_corpus_files(inputs), options.corpus);
  const std::filesystem::path out(options.out_dir);
  SplitWriter train((out / "train").string(), "train", tokenizer.vocab_size(), options.shard_tokens);
  SplitWriter val((out / "val").string(), "val", tokenizer.vocab_size(), options.shard_tokens);
  std::vector<EncodeCache> caches(n_threads);
  std::vector<TextBlock> batch;
  std::vector<std::vector<uint32_t>> ids;
  std::vector<char> to_val;
  CorpusEncodeResult result;
  bool current_val = false;
  while (reader.next_batch(batch, size_t{32} << 20)) {
    to_val.resize(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {  // splits are decided in corpus order
      if (batch[i].starts_document) {
        current_val = is_val_document(result.documents++, options.val_fraction);
        result.val_documents += current_val;
      }
      to_val[i] = current_val;
    }
    ids.resize(batch.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
    for (size_t i = 0; i < batch.size(); ++i) {
      ids[i].clear();
      if (batch[i].starts_document) ids[i].push_back(eot);
      tokenizer.encode(batch[i].text, ids[i], caches[omp_get_thread_num()]);
    }
    for (size_t i = 0; i < batch.size(); ++i) (to_val[i] ? val : train).write(ids[i]);
    if (options.progress) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      options.progress(Progress{"encoding", reader.bytes_read(), reader.total_bytes(), true,
                                train.tokens() + val.tokens(), s});
    }
  }
  train.finish();
  val.finish();
  result.train_shards = train.files();
  result.val_shards = val.files();
  result.train_tokens = train.tokens();
  result.val_tokens = val.tokens();
  result.bytes = reader.bytes_read();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace ember::data
