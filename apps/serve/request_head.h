// A request's head (request line and headers, up to the blank line) checked for
// how its body is framed, as a reverse proxy checks it before reading a byte of
// body: one Content-Length of digits only, or Transfer-Encoding chunked alone,
// never both; no body framing at all means no body. An HTTP/1.0 request has no
// chunked coding: its Transfer-Encoding is faulty framing, and its Expect is
// ignored (a 1.0 client is sent no 100 Continue). Also the head rewritten for
// the HTTP library once ember has decided the body's length itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember::apps::serve {

// The index just past the head's blank line ("\r\n\r\n"), or npos while it is incomplete.
size_t head_end(std::string_view bytes);

struct HeadFraming {
  int status = 0;       // 0: well framed; else the answer: 400, 413 or 501
  std::string code;     // the error's code: invalid_http_framing, request_too_large,
                        // unsupported_transfer_encoding
  std::string message;  // what is wrong (status != 0)
  bool chunked = false;
  uint64_t content_length = 0;   // not chunked: the body's length (0 without a Content-Length)
  bool expect_continue = false;  // "Expect: 100-continue" in an HTTP/1.1 request
  bool http10 = false;           // the request line's version is HTTP/1.0
};

// `head` ends with its blank line. A Content-Length over max_body_bytes is 413.
HeadFraming check_framing(std::string_view head, size_t max_body_bytes);

// The head without its Content-Length and Transfer-Encoding lines (and its Expect lines
// when drop_expect) and with "Content-Length: N" instead.
std::string with_content_length(std::string_view head, uint64_t n, bool drop_expect);

}  // namespace ember::apps::serve
