// Incremental parser of a text/event-stream body (the SSE of the OpenAI API):
// bytes arrive in arbitrary pieces (an event may be split across pieces, or
// several events merged in one); each complete event's data (its "data:" lines
// joined by "\n") is handed out once its blank line arrives. Lines end in "\n"
// or "\r\n"; comments (":...") and the other fields (event, id, retry) are skipped.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace ember::apps {

class SseParser {
 public:
  using EventHandler = std::function<void(const std::string& data)>;

  // Parses the bytes, calling on_event for every event they complete.
  void feed(std::string_view bytes, const EventHandler& on_event);

  // True when bytes of an unfinished line or event are pending (a stream cut short).
  bool has_partial_event() const { return !line_.empty() || has_data_; }

 private:
  void end_line(const EventHandler& on_event);

  std::string line_;  // the current line so far
  std::string data_;  // the current event's data so far
  bool has_data_ = false;
};

}  // namespace ember::apps
