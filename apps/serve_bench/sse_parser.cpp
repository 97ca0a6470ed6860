// SseParser: lines assembled across pieces, events ended by a blank line.
#include "apps/serve_bench/sse_parser.h"

namespace ember::apps {

void SseParser::feed(std::string_view bytes, const EventHandler& on_event) {
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      line_.append(bytes);
      return;
    }
    line_.append(bytes.substr(0, nl));
    bytes.remove_prefix(nl + 1);
    end_line(on_event);
  }
}

void SseParser::end_line(const EventHandler& on_event) {
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  if (line_.empty()) {  // a blank line ends the event
    if (has_data_) on_event(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  const size_t colon = line_.find(':');
  const std::string_view field = std::string_view(line_).substr(0, colon);
  if (colon != 0 && field == "data") {
    std::string_view value =
        colon == std::string::npos ? "" : std::string_view(line_).substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
  line_.clear();
}

}  // namespace ember::apps
