// Encodes a corpus into llm.c token shards, each document preceded by
// <|endoftext|>: an even spread of val_fraction of the documents goes to
// OUT/val/val_NNNNNN.bin, the rest to OUT/train/train_NNNNNN.bin. Documents are
// encoded in parallel (OpenMP) and written in corpus order, whatever the threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/job_progress.h"
#include "data/tokenizer/tokenizer.h"

namespace ember::data {

struct CorpusEncodeOptions {
  std::string out_dir;
  double val_fraction = 0.0;            // in [0, 1)
  uint64_t shard_tokens = 100'000'000;  // tokens per shard (the last one may hold fewer)
  CorpusOptions corpus;
  int threads = 0;  // <= 0: OpenMP's default
  ProgressFn progress;
};

struct CorpusEncodeResult {
  std::vector<std::string> train_shards, val_shards;
  uint64_t train_tokens = 0, val_tokens = 0;
  uint64_t documents = 0, val_documents = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// inputs as for list_corpus_files. Existing shards of the same names are replaced.
CorpusEncodeResult encode_corpus(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                                 const CorpusEncodeOptions& options);

// Whether document i (0-based) belongs to the validation split: exactly
// floor(n * f) of the first n documents do, evenly spread.
inline bool is_val_document(uint64_t i, double val_fraction) {
  return static_cast<uint64_t>((i + 1) * val_fraction) > static_cast<uint64_t>(i * val_fraction);
}

}  // namespace ember::data
