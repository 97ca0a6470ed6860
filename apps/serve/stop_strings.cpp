// Stop-string matching with hold-back (apps/serve/stop_strings.h).
#include "apps/serve/stop_strings.h"

#include <algorithm>

namespace ember::apps::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_ += text;
  size_t first = std::string::npos;  // earliest start of a stop string
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    std::string out = held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold the longest tail of held_ that is a proper prefix of a stop string: a stop
  // string starting before that tail would have to be complete already.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace ember::apps::serve
