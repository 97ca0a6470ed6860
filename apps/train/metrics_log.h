// OUT/metrics.jsonl, one JSON object a line, appended so that the file only
// ever holds complete lines: each line goes out in one write(), a failed or
// short write is cut back to the last complete line, and opening drops a
// partial last line left by a crash or a full disk.
#pragma once
#include <string>

namespace ember::apps {

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // "": closed, append() does nothing
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends line + "\n"; an Error "<path>: cannot append a line: <reason>" on failure.
  void append(const std::string& line);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace ember::apps
