// Word counts for BPE training: how often each pre-tokenized piece occurs in
// a corpus (special tokens cut the text and are not counted). Counting a
// corpus streams it and runs over blocks in parallel with OpenMP; the counts,
// and so everything trained from them, do not depend on the thread count.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer/hash_table.h"
#include "data/job_progress.h"

namespace ember::data {

class WordCounts {
 public:
  // Counts the pieces of text; occurrences of the special tokens are skipped.
  void add_text(std::string_view text, const std::vector<std::string>& specials);
  void add(std::string_view word, uint64_t count);
  void merge(const WordCounts& other);
  size_t size() const { return table_.size(); }
  // (word, count) sorted by the word's bytes: a deterministic order.
  std::vector<std::pair<std::string, uint64_t>> sorted() const;

 private:
  void add_pieces(std::string_view text);
  StringTable<uint64_t> table_{size_t{1} << 12};
};

// Counts the words of the corpus files (see list_corpus_files for inputs).
// threads <= 0 uses OpenMP's default.
WordCounts count_corpus_words(const std::vector<std::string>& files, const CorpusOptions& options,
                              const std::vector<std::string>& specials, int threads = 0,
                              const ProgressFn& progress = {});

}  // namespace ember::data
