// Prompts of P words, generated from a word list or cut from a text file.
#include "apps/serve_bench/bench_prompts.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "apps/common/utf8_text.h"
#include "core/error.h"

namespace ember::apps {

namespace {

// Common words; each is a single GPT-2 token when preceded by a space.
constexpr std::array<const char*, 96> kWords = {
    "the",  "of",    "and",    "to",     "in",    "is",    "that",  "for",    "it",    "as",
    "was",  "with",  "be",     "by",     "on",    "not",   "he",    "this",   "are",   "or",
    "his",  "from",  "at",     "which",  "but",   "have",  "an",    "had",    "they",  "you",
    "were", "their", "one",    "all",    "we",    "can",   "her",   "has",    "there", "been",
    "if",   "more",  "when",   "will",   "would", "who",   "so",    "no",     "time",  "people",
    "year", "way",   "day",    "man",    "world", "life",  "part",  "house",  "place", "work",
    "week", "case",  "point",  "number", "group", "water", "city",  "story",  "money", "night",
    "game", "book",  "light",  "river",  "small", "large", "great", "old",    "new",   "good",
    "long", "right", "little", "high",   "young", "early", "open",  "public", "make",  "know",
    "take", "see",   "come",   "think",  "look",  "find",
};

}  // namespace

uint64_t request_seed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

BenchPrompts::BenchPrompts(int64_t words_per_prompt, uint64_t seed, const std::string& file_path)
    : words_per_prompt_(words_per_prompt), seed_(seed) {
  if (file_path.empty()) return;
  std::ifstream in(file_path, std::ios::binary);
  EMBER_CHECK(in, "--prompt-file: cannot read '", file_path, "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EMBER_CHECK(!in.bad(), "--prompt-file: reading '", file_path, "' failed");
  // A prompt goes into a JSON request, which holds only UTF-8 text.
  const size_t bad = first_invalid_utf8(text);
  if (bad != std::string::npos) {
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + bad, '\n'));
    throw Error("--prompt-file '" + file_path + "': line " + std::to_string(line) + " (byte offset " +
                std::to_string(bad) + ") is not valid UTF-8; give a UTF-8 text file");
  }
  std::istringstream words(text);
  std::string word;
  while (words >> word) file_words_.push_back(word);
  EMBER_CHECK(!file_words_.empty(), "--prompt-file: '", file_path, "' holds no words");
}

std::string BenchPrompts::prompt(uint64_t index) const {
  std::mt19937_64 rng(request_seed(seed_, index));
  std::string text;
  const size_t n_words = file_words_.empty() ? kWords.size() : file_words_.size();
  size_t at = std::uniform_int_distribution<size_t>(0, n_words - 1)(rng);
  for (int64_t i = 0; i < words_per_prompt_; ++i) {
    if (i > 0) text += ' ';
    if (file_words_.empty()) {
      text += kWords[std::uniform_int_distribution<size_t>(0, n_words - 1)(rng)];
    } else {
      text += file_words_[at];
      at = (at + 1) % n_words;
    }
  }
  return text;
}

}  // namespace ember::apps
