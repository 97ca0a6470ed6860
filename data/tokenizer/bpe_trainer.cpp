// BPE training (see data/tokenizer/bpe_trainer.h). The words' symbols live in one flat
// array and shrink in place as merges apply; each pair keeps its count and the
// words it may occur in, so a merge visits only those words.
#include "data/tokenizer/bpe_trainer.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "core/error.h"

namespace ember::data {
namespace {

struct HeapEntry {
  uint64_t count;
  uint64_t key;  // pair_key(left, right)
};
// Max-heap order: the larger count first, then the smaller pair of ids.
struct HeapLess {
  bool operator()(const HeapEntry& x, const HeapEntry& y) const {
    return x.count != y.count ? x.count < y.count : x.key > y.key;
  }
};

class MergeTrainer {
 public:
  explicit MergeTrainer(const std::vector<std::pair<std::string, uint64_t>>& words) {
    for (int b = 0; b < 256; ++b) add_token(std::string(1, static_cast<char>(b)));
    for (const auto& [word, count] : words) {
      if (word.size() < 2 || count == 0) continue;
      start_.push_back(syms_.size());
      len_.push_back(static_cast<uint32_t>(word.size()));
      count_.push_back(count);
      for (char c : word) syms_.push_back(static_cast<uint8_t>(c));
    }
    EMBER_CHECK(count_.size() < UINT32_MAX, "BPE training: too many distinct words");
    for (uint32_t w = 0; w < count_.size(); ++w) {
      const uint32_t* s = &syms_[start_[w]];
      for (uint32_t i = 0; i + 1 < len_[w]; ++i) {
        const uint32_t p = pair_index(pair_key(s[i], s[i + 1]));
        pair_count_[p] += static_cast<int64_t>(count_[w]);
        if (where_[p].empty() || where_[p].back() != w) where_[p].push_back(w);
      }
    }
    for (uint32_t p = 0; p < pair_keys_.size(); ++p)
      heap_.push_back(HeapEntry{static_cast<uint64_t>(pair_count_[p]), pair_keys_[p]});
    std::make_heap(heap_.begin(), heap_.end(), HeapLess{});
  }

  // Merges until there are n_tokens tokens or no pair occurs min_count times.
  void run(size_t n_tokens, uint64_t min_count, const ProgressFn& progress) {
    const auto start = std::chrono::steady_clock::now();
    const uint64_t planned = n_tokens > tokens_.size() ? n_tokens - tokens_.size() : 0;
    while (tokens_.size() < n_tokens && !heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), HeapLess{});
      const HeapEntry top = heap_.back();
      heap_.pop_back();
      const uint32_t p = *pair_ids_.find(top.key);
      const int64_t now = pair_count_[p];
      if (static_cast<int64_t>(top.count) != now) {  // stale: re-queue with the true count
        if (now > 0) push(p);
        continue;
      }
      if (top.count < std::max<uint64_t>(min_count, 1)) break;
      const uint32_t a = static_cast<uint32_t>(top.key >> 32), b = static_cast<uint32_t>(top.key);
      const uint32_t c = add_token(tokens_[a] + tokens_[b]);
      merges_.push_back(BpeMerge{a, b, c});
      apply_merge(p, a, b, c);
      if (progress && merges_.size() % 1024 == 0) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        progress(Progress{"merging", merges_.size(), planned, false, 0, s});
      }
    }
  }

  std::vector<std::string>& tokens() { return tokens_; }
  std::vector<BpeMerge>& merges() { return merges_; }

 private:
  uint32_t add_token(const std::string& bytes) {
    auto [id, inserted] = token_ids_.insert(bytes, hash_bytes(bytes),
                                            static_cast<uint32_t>(tokens_.size()));
    if (inserted) tokens_.push_back(bytes);
    return *id;
  }
  uint32_t pair_index(uint64_t key) {
    auto [p, inserted] = pair_ids_.insert(key, static_cast<uint32_t>(pair_keys_.size()));
    const uint32_t index = *p;
    if (inserted) {
      pair_keys_.push_back(key);
      pair_count_.push_back(0);
      where_.emplace_back();
      stamp_.push_back(0);
    }
    return index;
  }
  void push(uint32_t p) {
    heap_.push_back(HeapEntry{static_cast<uint64_t>(pair_count_[p]), pair_keys_[p]});
    std::push_heap(heap_.begin(), heap_.end(), HeapLess{});
  }

  // Replaces every (a, b) by c in the words that hold it, left to right, and
  // moves the counts of the neighbouring pairs: (x, a) -> (x, c), (b, y) -> (c, y).
  void apply_merge(uint32_t p, uint32_t a, uint32_t b, uint32_t c) {
    std::vector<uint32_t> words = std::move(where_[p]);
    where_[p] = {};
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    const uint64_t merged = pair_keys_[p];
    ++stamp_now_;
    touched_.clear();
    for (const uint32_t w : words) {
      uint32_t* s = &syms_[start_[w]];
      const uint32_t len = len_[w];
      const auto wc = static_cast<int64_t>(count_[w]);
      uint32_t i = 0, j = 0;
      while (i < len) {
        if (i + 1 < len && s[i] == a && s[i + 1] == b) {
          if (j > 0) {
            change(pair_key(s[j - 1], a), merged, -wc);
            grow(pair_key(s[j - 1], c), wc, w);
          }
          if (i + 2 < len) {
            change(pair_key(b, s[i + 2]), merged, -wc);
            grow(pair_key(c, s[i + 2]), wc, w);
          }
          s[j++] = c;
          i += 2;
        } else {
          s[j++] = s[i++];
        }
      }
      len_[w] = j;
    }
    pair_count_[p] = 0;
    for (const uint32_t t : touched_)
      if (pair_count_[t] > 0) push(t);
  }
  void change(uint64_t key, uint64_t merged, int64_t delta) {
    if (key != merged) pair_count_[*pair_ids_.find(key)] += delta;
  }
  void grow(uint64_t key, int64_t delta, uint32_t w) {
    const uint32_t q = pair_index(key);
    pair_count_[q] += delta;
    if (where_[q].empty() || where_[q].back() != w) where_[q].push_back(w);
    if (stamp_[q] != stamp_now_) {
      stamp_[q] = stamp_now_;
      touched_.push_back(q);
    }
  }

  std::vector<uint32_t> syms_;
  std::vector<uint64_t> start_;
  std::vector<uint32_t> len_;
  std::vector<uint64_t> count_;
  PairTable<uint32_t> pair_ids_{size_t{1} << 16};
  std::vector<uint64_t> pair_keys_;
  std::vector<int64_t> pair_count_;
  std::vector<std::vector<uint32_t>> where_;
  std::vector<uint32_t> stamp_;
  uint32_t stamp_now_ = 0;
  std::vector<uint32_t> touched_;
  std::vector<HeapEntry> heap_;
  std::vector<std::string> tokens_;
  StringTable<uint32_t> token_ids_;
  std::vector<BpeMerge> merges_;
};

void check_options(const BpeTrainOptions& o) {
  std::set<std::string> seen;
  for (const auto& s : o.special_tokens) {
    EMBER_CHECK(!s.empty(), "BPE training: a special token is empty");
    EMBER_CHECK(seen.insert(s).second, "BPE training: special token '", s, "' given twice");
  }
  EMBER_CHECK(o.vocab_size >= 256 + o.special_tokens.size(), "BPE training: vocab size ",
              o.vocab_size, " is smaller than the 256 byte tokens plus ", o.special_tokens.size(),
              " special tokens");
  EMBER_CHECK(o.vocab_size < (size_t{1} << 31), "BPE training: vocab size ", o.vocab_size,
              " is too large");
}

}  // namespace

Tokenizer train_bpe(std::vector<std::pair<std::string, uint64_t>> words,
                    const BpeTrainOptions& options, const ProgressFn& progress) {
  check_options(options);
  std::sort(words.begin(), words.end());
  MergeTrainer trainer(words);
  words.clear();
  trainer.run(options.vocab_size - options.special_tokens.size(), options.min_frequency, progress);
  std::vector<std::string> tokens = std::move(trainer.tokens());
  std::vector<SpecialToken> specials;
  for (const auto& s : options.special_tokens) {
    specials.push_back(SpecialToken{s, static_cast<uint32_t>(tokens.size()), true});
    tokens.push_back(s);
  }
  return Tokenizer(BpeModel(std::move(tokens), std::move(trainer.merges())), std::move(specials));
}

Tokenizer train_bpe_on_text(std::string_view text, const BpeTrainOptions& options) {
  check_options(options);
  WordCounts counts;
  counts.add_text(text, options.special_tokens);
  return train_bpe(counts.sorted(), options);
}

Tokenizer train_bpe_on_corpus(const std::vector<std::string>& inputs,
                              const BpeTrainOptions& options, const CorpusOptions& corpus,
                              const ProgressFn& progress) {
  check_options(options);
  const WordCounts counts = count_corpus_words(list_corpus_files(inputs), corpus,
                                               options.special_tokens, options.threads, progress);
  return train_bpe(counts.sorted(), options, progress);
}

}  // namespace ember::data
