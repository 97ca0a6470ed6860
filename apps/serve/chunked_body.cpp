// Chunked request bodies decoded with a size limit (apps/serve/chunked_body.h):
// chunk-size in hex with optional extensions, CRLF, data, CRLF; a zero-size
// chunk, trailer lines and a blank line end the body.
#include "apps/serve/chunked_body.h"

#include <algorithm>

namespace ember::apps::serve {
namespace {

constexpr size_t kMaxLine = 4096;           // a size line with its extensions, a trailer line
constexpr size_t kMaxTrailerBytes = 16384;  // the trailer section as a whole

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

ChunkedBody::State ChunkedBody::fail(std::string why) {
  error_ = std::move(why);
  return state_ = State::malformed;
}

// Appends to `line` up to and including its LF; true once the line is whole (then
// `line` holds it without its CRLF).
bool ChunkedBody::take_line(std::string_view in, size_t& i, std::string& line) {
  while (i < in.size()) {
    const char c = in[i++];
    if (c == '\n') {
      if (line.empty() || line.back() != '\r') {
        fail("a line of the chunked body ends with a bare LF");
        return false;
      }
      line.pop_back();
      return true;
    }
    line += c;
    if (line.size() > kMaxLine) {
      fail("a line of the chunked body is longer than " + std::to_string(kMaxLine) + " bytes");
      return false;
    }
  }
  return false;
}

void ChunkedBody::size_line_read() {
  const std::string_view size = std::string_view(line_).substr(0, line_.find(';'));
  const size_t digits = size.find_last_not_of(" \t") + 1;  // blanks before the extensions
  uint64_t n = 0;
  if (digits == 0) {
    fail("a chunk size is missing");
    return;
  }
  for (size_t i = 0; i < digits; ++i) {
    const int d = hex_digit(size[i]);
    if (d < 0) {
      fail("the chunk size '" + std::string(size.substr(0, 40)) + "' is not hexadecimal");
      return;
    }
    if (n > (UINT64_MAX >> 4)) {
      state_ = State::too_large;
      return;
    }
    n = n * 16 + static_cast<uint64_t>(d);
  }
  line_.clear();
  if (n > max_ - body_.size()) {
    state_ = State::too_large;
    return;
  }
  left_ = n;
  part_ = n == 0 ? Part::trailer : Part::data;
}

ChunkedBody::State ChunkedBody::feed(std::string_view in, size_t& used) {
  size_t i = 0;
  while (state_ == State::more && i < in.size()) {
    switch (part_) {
      case Part::size_line:
        if (take_line(in, i, line_)) size_line_read();
        break;
      case Part::data: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, in.size() - i));
        body_.append(in.data() + i, n);
        i += n;
        left_ -= n;
        if (left_ == 0) part_ = Part::data_end;
        break;
      }
      case Part::data_end:
        if (take_line(in, i, line_)) {
          if (!line_.empty()) {
            fail("a chunk's data is longer than its size");
          } else {
            part_ = Part::size_line;
          }
        }
        break;
      case Part::trailer: {
        const size_t before = i;
        const bool whole = take_line(in, i, line_);
        trailer_bytes_ += i - before;
        if (trailer_bytes_ > kMaxTrailerBytes) {
          fail("the chunked body's trailer is longer than " + std::to_string(kMaxTrailerBytes) +
               " bytes");
        } else if (whole) {
          if (line_.empty()) state_ = State::done;
          line_.clear();
        }
        break;
      }
    }
  }
  used = i;
  return state_;
}

}  // namespace ember::apps::serve
