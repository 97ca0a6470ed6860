// A request body in HTTP/1.1 chunked transfer coding, decoded as it arrives and
// bounded: a chunk whose size would take the body past the limit ends the decoding
// as soon as its size line is read, before its data arrives, so a chunked body
// over --max-body-bytes is refused as early as one with a Content-Length.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::apps::serve {

class ChunkedBody {
 public:
  enum class State { more, done, too_large, malformed };

  explicit ChunkedBody(size_t max_body_bytes) : max_(max_body_bytes) {}

  // Takes the next bytes of the connection; `used` is how many of them belong to the
  // body (on done, the rest are the next request's). Once not `more`, the state stays.
  State feed(std::string_view in, size_t& used);
  State state() const { return state_; }
  const std::string& body() const { return body_; }
  std::string& body() { return body_; }
  const std::string& error() const { return error_; }  // malformed: what was wrong

 private:
  enum class Part { size_line, data, data_end, trailer };
  State fail(std::string why);
  bool take_line(std::string_view in, size_t& i, std::string& line);
  void size_line_read();

  size_t max_;
  State state_ = State::more;
  Part part_ = Part::size_line;
  std::string line_, body_, error_;
  uint64_t left_ = 0;         // data bytes of the current chunk still to come
  size_t trailer_bytes_ = 0;  // the trailer section's size so far
};

}  // namespace ember::apps::serve
