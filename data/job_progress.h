// Progress reports of long data jobs (tokenizer training, corpus encoding) and
// their one-line rendering: a bar with rate and ETA for a terminal, a plain
// line otherwise. The library only calls the callback; apps decide where to print.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace ember::data {

struct Progress {
  std::string stage;     // "counting", "merging", "encoding"
  uint64_t done = 0;     // bytes (counting, encoding) or merges (merging)
  uint64_t total = 0;    // 0 when unknown
  bool bytes = true;     // done/total count bytes (rates in MB/s)
  uint64_t tokens = 0;   // tokens written so far (encoding)
  double seconds = 0;    // since the stage began
};

using ProgressFn = std::function<void(const Progress&)>;

// "encoding [#########.....]  63%  41.2 MB/s  ETA 0:12" (terminal) or
// "encoding 63% 12.0/19.1 MB 41.2 MB/s ETA 0:12" (plain).
std::string format_progress(const Progress& p, bool terminal);

}  // namespace ember::data
