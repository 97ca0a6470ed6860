// WordCounts and count_corpus_words: pre-tokenize and count, one table per
// thread, merged at the end (sums, so the order of merging does not matter).
#include "data/tokenizer/word_counts.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "data/tokenizer/pretokenize.h"

namespace ember::data {

void WordCounts::add(std::string_view word, uint64_t count) {
  *table_.insert(word, hash_bytes(word), 0).first += count;
}

void WordCounts::add_pieces(std::string_view text) {
  pretokenize(text, [&](std::string_view piece) { add(piece, 1); });
}

void WordCounts::add_text(std::string_view text, const std::vector<std::string>& specials) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos, len = 0;
    for (const auto& s : specials) {
      const size_t at = text.find(s, pos);
      if (at < best || (at == best && at != std::string_view::npos && s.size() > len)) {
        best = at;
        len = s.size();
      }
    }
    if (best == std::string_view::npos) {
      add_pieces(text.substr(pos));
      return;
    }
    add_pieces(text.substr(pos, best - pos));
    pos = best + len;
  }
}

void WordCounts::merge(const WordCounts& other) {
  other.table_.for_each([&](std::string_view w, uint64_t c) { add(w, c); });
}

std::vector<std::pair<std::string, uint64_t>> WordCounts::sorted() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(table_.size());
  table_.for_each([&](std::string_view w, uint64_t c) { out.emplace_back(std::string(w), c); });
  std::sort(out.begin(), out.end());
  return out;
}

WordCounts count_corpus_words(const std::vector<std::string>& files, const CorpusOptions& options,
                              const std::vector<std::string>& specials, int threads,
                              const ProgressFn& progress) {
  const int n_threads = threads > 0 ? threads : omp_get_max_threads();
  CorpusReader reader(files, options);
  std::vector<WordCounts> counts(n_threads);
  std::vector<TextBlock> batch;
  const auto start = std::chrono::steady_clock::now();
  while (reader.next_batch(batch, size_t{16} << 20)) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
    for (size_t i = 0; i < batch.size(); ++i)
      counts[omp_get_thread_num()].add_text(batch[i].text, specials);
    if (progress) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress(Progress{"counting", reader.bytes_read(), reader.total_bytes(), true, 0, s});
    }
  }
  // Merge pairwise in parallel, then the rest into counts[0].
  for (int step = 1; step < n_threads; step *= 2) {
#pragma omp parallel for schedule(static, 1) num_threads(n_threads)
    for (int i = 0; i < n_threads; i += 2 * step)
      if (i + step < n_threads) {
        counts[i].merge(counts[i + step]);
        counts[i + step] = WordCounts{};
      }
  }
  return std::move(counts[0]);
}

}  // namespace ember::data
