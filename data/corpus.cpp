// Corpus file listing (files, directories, globs) and CorpusReader, which
// streams the files as blocks of whole documents or safe cuts of long ones.
#include "data/corpus.h"

#include <glob.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>

#include "core/error.h"
#include "data/tokenizer/tokenizer.h"

namespace ember::data {
namespace fs = std::filesystem;

namespace {

bool looks_binary(const fs::path& p) {
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return true;
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  return std::memchr(buf, 0, n) != nullptr;
}

bool hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

void add_directory(const fs::path& dir, std::vector<fs::path>& out) {
  std::vector<fs::path> found;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    if (hidden(it->path())) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && !looks_binary(it->path())) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace

std::vector<std::string> list_corpus_files(const std::vector<std::string>& inputs) {
  EMBER_CHECK(!inputs.empty(), "no corpus files given");
  std::vector<fs::path> paths;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      const size_t before = paths.size();
      add_directory(in, paths);
      EMBER_CHECK(paths.size() > before, "corpus directory '", in, "' holds no text files");
    } else if (fs::exists(in, ec)) {
      EMBER_CHECK(fs::is_regular_file(in, ec), "corpus input '", in, "' is not a regular file");
      paths.emplace_back(in);
    } else if (in.find_first_of("*?[") != std::string::npos) {
      glob_t g{};
      const int rc = ::glob(in.c_str(), 0, nullptr, &g);
      std::vector<fs::path> matched;
      for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) matched.emplace_back(g.gl_pathv[i]);
      ::globfree(&g);
      EMBER_CHECK(!matched.empty(), "no corpus files match '", in, "'");
      for (const fs::path& m : matched) {
        if (fs::is_directory(m, ec)) add_directory(m, paths);
        else if (fs::is_regular_file(m, ec) && !hidden(m) && !looks_binary(m)) paths.push_back(m);
      }
    } else {
      throw Error(detail::concat("corpus file '", in, "' does not exist"));
    }
  }
  std::vector<std::string> out;
  std::set<fs::path> seen;
  for (const fs::path& p : paths) {
    std::error_code ec;
    const fs::path canon = fs::canonical(p, ec);
    if (seen.insert(ec ? p : canon).second) out.push_back(p.string());
  }
  EMBER_CHECK(!out.empty(), "the corpus inputs name no text files");
  return out;
}

CorpusReader::CorpusReader(std::vector<std::string> files, CorpusOptions options)
    : files_(std::move(files)), options_(std::move(options)) {
  EMBER_CHECK(options_.block_bytes >= 1024, "corpus block size must be at least 1 KiB");
  for (const auto& f : files_) {
    std::error_code ec;
    const auto size = fs::file_size(f, ec);
    EMBER_CHECK(!ec, "cannot read corpus file '", f, "': ", ec.message());
    total_ += size;
  }
}

CorpusReader::~CorpusReader() {
  if (file_) std::fclose(file_);
}

bool CorpusReader::open_next_file() {
  if (file_index_ >= files_.size()) return false;
  const std::string& path = files_[file_index_++];
  file_ = std::fopen(path.c_str(), "rb");
  EMBER_CHECK(file_, "cannot open corpus file '", path, "': ", std::strerror(errno));
  eof_ = false;
  buf_.assign(1, '\n');  // a virtual newline before the file, so a separator line can open it
  head_ = scan_from_ = 1;
  in_document_ = false;
  return true;
}

bool CorpusReader::fill() {
  if (head_ > 1) {  // keep one byte before head_: a separator line looks back at it
    buf_.erase(0, head_ - 1);
    scan_from_ -= head_ - 1;
    head_ = 1;
  }
  const size_t chunk = std::max<size_t>(options_.block_bytes, size_t{4} << 20);
  const size_t old = buf_.size();
  buf_.resize(old + chunk);
  const size_t n = std::fread(buf_.data() + old, 1, chunk, file_);
  buf_.resize(old + n);
  EMBER_CHECK(!std::ferror(file_), "error reading corpus file '", files_[file_index_ - 1], "'");
  if (n < chunk) eof_ = true;
  return n > 0;
}

// The position where the document ends at the earliest separator at or after
// `from`, or npos; *skip is where the text after the separator starts.
size_t CorpusReader::find_separator(size_t from, size_t* skip) const {
  size_t best = std::string::npos;
  if (options_.split_on_end_of_text) {
    const size_t e = buf_.find(kEndOfText, from);
    if (e != std::string::npos) {
      best = e;
      *skip = e + kEndOfText.size();
    }
  }
  const std::string& sep = options_.separator_line;
  if (!sep.empty()) {
    const std::string needle = "\n" + sep + "\n";
    const size_t s = buf_.find(needle, from - 1);
    if (s != std::string::npos && s + 1 < best) {
      best = s + 1;
      *skip = s + needle.size();
    } else if (s == std::string::npos && eof_ && buf_.size() >= head_ - 1 + sep.size() + 1 &&
               std::string_view(buf_).ends_with(needle.substr(0, needle.size() - 1))) {
      const size_t at = buf_.size() - sep.size();
      if (at < best) {
        best = at;
        *skip = buf_.size();
      }
    }
  }
  return best;
}

// A cut point for a block of a long document: buf_[k] == '\n' after a
// printable ASCII character, searched backwards from about block_bytes.
size_t CorpusReader::find_cut() const {
  const size_t limit = std::min(buf_.size() - 1, head_ + options_.block_bytes);
  for (size_t k = limit; k > head_; --k) {
    const auto prev = static_cast<unsigned char>(buf_[k - 1]);
    if (buf_[k] == '\n' && prev > 0x20 && prev < 0x7F) return k;
  }
  // 16 blocks without such a point: cut at a UTF-8 character boundary instead.
  if (eof_ || buf_.size() - head_ < 16 * options_.block_bytes) return std::string::npos;
  size_t k = limit;
  while (k > head_ + 1 && (static_cast<unsigned char>(buf_[k]) & 0xC0) == 0x80) --k;
  return k;
}

bool CorpusReader::next(TextBlock& block) {
  auto emit = [&](size_t a, size_t b) {
    if (b <= a) return false;
    block.text.assign(buf_, a, b - a);
    block.starts_document = !in_document_;
    return true;
  };
  const size_t longest = std::max(kEndOfText.size(), options_.separator_line.size() + 2);
  while (true) {
    if (!file_ && !open_next_file()) return false;
    size_t skip = 0;
    const size_t end = find_separator(std::max(head_, scan_from_), &skip);
    if (end != std::string::npos) {
      const bool got = emit(head_, end);
      consumed_ += skip - head_;
      head_ = scan_from_ = skip;
      in_document_ = false;
      if (got) return true;
      continue;
    }
    if (buf_.size() - head_ > options_.block_bytes) {
      const size_t cut = find_cut();
      if (cut != std::string::npos) {
        emit(head_, cut);
        consumed_ += cut - head_;
        head_ = scan_from_ = cut;
        in_document_ = true;
        return true;
      }
    }
    if (!eof_) {
      scan_from_ = std::max(head_, buf_.size() >= longest ? buf_.size() - longest + 1 : size_t{0});
      fill();
      continue;
    }
    const bool got = emit(head_, buf_.size());
    consumed_ += buf_.size() - head_;
    std::fclose(file_);
    file_ = nullptr;
    buf_.clear();
    in_document_ = false;
    if (got) return true;
  }
}

bool CorpusReader::next_batch(std::vector<TextBlock>& out, size_t max_bytes) {
  out.clear();
  size_t bytes = 0;
  TextBlock block;
  while (bytes < max_bytes && next(block)) {
    bytes += block.text.size();
    out.push_back(std::move(block));
  }
  return !out.empty();
}

}  // namespace ember::data
