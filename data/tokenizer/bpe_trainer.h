// Byte-level BPE training: from word counts (or a corpus) to a Tokenizer of a
// target vocabulary size. Ids 0-255 are the bytes, then one token per merge,
// then the special tokens (by default <|endoftext|>, <|im_start|>, <|im_end|>).
// The pair-count algorithm is incremental: counts of adjacent pairs over the
// unique words, updated only in the words a merge touches, the best pair taken
// from a priority queue (ties: lower ids first).
#pragma once
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "data/corpus.h"
#include "data/job_progress.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/word_counts.h"

namespace ember::data {

struct BpeTrainOptions {
  size_t vocab_size = 8192;  // everything: 256 bytes + merges + special tokens
  uint64_t min_frequency = 2;  // a pair seen fewer times is never merged
  // Appended after the merges, in order; by default the three ember reserves.
  std::vector<std::string> special_tokens{std::begin(kReservedSpecials), std::end(kReservedSpecials)};
  int threads = 0;  // for counting the corpus; <= 0: OpenMP's default
};

// Trains on (word, count) pairs; the result does not depend on their order.
Tokenizer train_bpe(std::vector<std::pair<std::string, uint64_t>> words,
                    const BpeTrainOptions& options, const ProgressFn& progress = {});
// Trains on text held in memory (special tokens in it are skipped).
Tokenizer train_bpe_on_text(std::string_view text, const BpeTrainOptions& options);
// Trains on corpus files, directories or globs, streamed (see data/corpus.h).
Tokenizer train_bpe_on_corpus(const std::vector<std::string>& inputs,
                              const BpeTrainOptions& options,
                              const CorpusOptions& corpus = {}, const ProgressFn& progress = {});

}  // namespace ember::data
