// A text corpus (files, directories, globs) streamed as blocks, never whole.
// Documents end at the end of a file, at <|endoftext|> and at an optional
// separator line ("%" for fortune files); a long document is cut where GPT-2's
// pre-tokenizer always splits (a printable ASCII character, then a newline).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace ember::data {

struct CorpusOptions {
  std::string separator_line;        // a line equal to this ends a document; "" for none
  bool split_on_end_of_text = true;  // "<|endoftext|>" in the text ends a document (and is dropped)
  size_t block_bytes = size_t{1} << 20;  // long documents are cut into blocks of about this size
};

// The files the inputs name, in order, each once. Directories and globs skip
// hidden files, binary files (a NUL byte in the first 4 KiB) and second names
// of a file already listed (symlinks). Missing files or empty matches are errors.
std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs);

struct TextBlock {
  std::string text;
  bool starts_document = true;  // false: continues the previous block's document
};

class CorpusReader {
 public:
  CorpusReader(std::vector<std::string> files, CorpusOptions options);
  ~CorpusReader();
  CorpusReader(const CorpusReader&) = delete;
  CorpusReader& operator=(const CorpusReader&) = delete;

  // The next non-empty block; false at the end of the corpus.
  bool next(TextBlock& block);
  // Replaces out with the next blocks, about max_bytes of text; false when none are left.
  bool next_batch(std::vector<TextBlock>& out, size_t max_bytes);
  uint64_t bytes_read() const { return consumed_; }  // input bytes handed out or skipped
  uint64_t total_bytes() const { return total_; }    // sum of the file sizes

 private:
  bool open_next_file();
  bool fill();  // reads more of the current file; false at its end
  size_t find_separator(size_t from, size_t* skip) const;
  size_t find_cut() const;

  std::vector<std::string> files_;
  CorpusOptions options_;
  size_t file_index_ = 0;
  std::FILE* file_ = nullptr;
  bool eof_ = true;
  std::string buf_;
  size_t head_ = 0;        // start of the unconsumed text in buf_
  size_t scan_from_ = 0;   // no separator starts before this (within the unconsumed text)
  bool in_document_ = false;
  uint64_t consumed_ = 0;
  uint64_t total_ = 0;
};

}  // namespace ember::data
