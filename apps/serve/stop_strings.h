// Stop strings on streamed text: the output ends just before the first
// occurrence of any of them (the stop string itself is not output). Text that
// could be the start of a stop string is held back until the next piece shows
// whether it is one, so a streamed client never sees part of a stop string.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ember::apps::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Appends text; returns the text that is now certain to be output. Once a stop
  // string was found, stopped() is true and everything after it is dropped.
  std::string push(std::string_view text);
  // The held-back text (the output ended without a stop string).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ember::apps::serve
