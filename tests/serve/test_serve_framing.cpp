// `ember serve`'s body framing without a socket: a request head checked as a
// reverse proxy checks it (conflicting or negative Content-Length, Content-Length
// with chunked, encodings other than chunked, any in HTTP/1.0, malformed header
// lines; no framing means no body; a 1.0 Expect ignored), the head rewritten with a plain Content-Length, and chunked
// bodies decoded under a size limit that stops at the first chunk size past it.
#include <catch2/catch.hpp>
#include <string>

#include "apps/serve/chunked_body.h"
#include "apps/serve/request_head.h"

using namespace ember::apps::serve;

namespace {

std::string head(const std::string& headers) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n";
}

HeadFraming framing(const std::string& headers, size_t max_body = 1000) {
  return check_framing(head(headers), max_body);
}

// Feeds `text` in pieces of `step` bytes; returns the state and the bytes left over.
ChunkedBody::State decode(ChunkedBody& body, const std::string& text, size_t step,
                          std::string* rest = nullptr) {
  size_t at = 0;
  while (at < text.size() && body.state() == ChunkedBody::State::more) {
    size_t used = 0;
    const std::string piece = text.substr(at, step);
    body.feed(piece, used);
    at += used;
    if (used < piece.size()) break;
  }
  if (rest) *rest = text.substr(at);
  return body.state();
}

}  // namespace

TEST_CASE("serve: a head's end is its blank line", "[serve]") {
  CHECK(head_end("GET / HTTP/1.1\r\nHost: x\r\n\r\nbody") == 27);
  CHECK(head_end("GET / HTTP/1.1\r\nHost: x\r\n") == std::string::npos);
  CHECK(head_end("GET / HTTP/1.1\nHost: x\n\n") == std::string::npos);
}

TEST_CASE("serve: body framing a reverse proxy accepts", "[serve]") {
  HeadFraming f = framing("Content-Length: 12\r\n");
  CHECK(f.status == 0);
  CHECK(f.content_length == 12);
  CHECK_FALSE(f.chunked);
  f = framing("content-length: 12\r\nContent-Length:12 \r\n");  // the same value twice
  CHECK(f.status == 0);
  CHECK(f.content_length == 12);
  f = framing("Transfer-Encoding: Chunked\r\nExpect: 100-continue\r\n");
  CHECK(f.status == 0);
  CHECK(f.chunked);
  CHECK(f.expect_continue);
  f = framing("");  // no framing: no body
  CHECK(f.status == 0);
  CHECK(f.content_length == 0);
}

TEST_CASE("serve: body framing a reverse proxy refuses", "[serve]") {
  const std::pair<std::string, int> refused[] = {
      {"Content-Length: 5\r\nContent-Length: 6\r\n", 400},
      {"Content-Length: -1\r\n", 400},
      {"Content-Length: 5, 5\r\n", 400},
      {"Content-Length: %35\r\n", 400},  // the library would url-decode it to 5
      {"Content-Length: \r\n", 400},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Content-Length : 5\r\n", 400},
      {"Content-Length: 5\nX: y\r\n", 400},  // a bare LF inside the head
      {"No colon here\r\n", 400},
      {"Transfer-Encoding: gzip, chunked\r\n", 501},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 501},
      {"Content-Length: 1001\r\n", 413},
      {"Content-Length: 99999999999999999999999\r\n", 413},
  };
  for (const auto& [headers, status] : refused) {
    INFO(headers);
    const HeadFraming f = framing(headers);
    CHECK(f.status == status);
    CHECK_FALSE(f.message.empty());
    CHECK(f.code == (status == 413   ? "request_too_large"
                     : status == 501 ? "unsupported_transfer_encoding"
                                     : "invalid_http_framing"));
  }
}

TEST_CASE("serve: an HTTP/1.0 head has no chunked coding and no 100 Continue", "[serve]") {
  const std::string v10 = "POST /v1/completions HTTP/1.0\r\nHost: x\r\n";
  HeadFraming f = check_framing(v10 + "Transfer-Encoding: chunked\r\n\r\n", 1000);
  CHECK(f.status == 400);
  CHECK(f.code == "invalid_http_framing");
  CHECK(f.message.find("HTTP/1.0") != std::string::npos);
  f = check_framing(v10 + "Content-Length: 3\r\nExpect: 100-continue\r\n\r\n", 1000);
  CHECK(f.status == 0);
  CHECK(f.http10);
  CHECK(f.content_length == 3);
  CHECK_FALSE(f.expect_continue);  // ignored: a 1.0 client is sent no 1xx
  f = framing("Content-Length: 3\r\nExpect: 100-continue\r\n");
  CHECK_FALSE(f.http10);
  CHECK(f.expect_continue);
}

TEST_CASE("serve: the head handed to the library has one plain Content-Length", "[serve]") {
  const std::string h = head("Transfer-Encoding: chunked\r\nExpect: 100-continue\r\nA: b\r\n");
  CHECK(with_content_length(h, 7, true) ==
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nA: b\r\nContent-Length: 7\r\n\r\n");
  CHECK(with_content_length(head("Content-Length: 3\r\nExpect: 100-continue\r\n"), 3, false) ==
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        "Content-Length: 3\r\n\r\n");
}

TEST_CASE("serve: a chunked body decodes in any split, and the rest is the next request's",
          "[serve]") {
  const std::string text =
      "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: t\r\n\r\nGET / HTTP/1.1\r\n";
  for (const size_t step : {size_t{1}, size_t{3}, size_t{1000}}) {
    INFO(step);
    ChunkedBody body(100);
    std::string rest;
    CHECK(decode(body, text, step, &rest) == ChunkedBody::State::done);
    CHECK(body.body() == "hello, world");
    CHECK(rest == "GET / HTTP/1.1\r\n");
  }
}

TEST_CASE("serve: a chunked body past the limit stops at the size line", "[serve]") {
  ChunkedBody body(10);
  size_t used = 0;
  // The first chunk fits; the second's size takes the body past 10 bytes: refused before
  // any of its data.
  const std::string text = "8\r\n12345678\r\n100000\r\n";
  CHECK(body.feed(text, used) == ChunkedBody::State::too_large);
  CHECK(used == text.size());
  CHECK(body.body() == "12345678");
  ChunkedBody huge(10);
  CHECK(huge.feed("fffffffffffffffffffff\r\n", used) == ChunkedBody::State::too_large);
}

TEST_CASE("serve: malformed chunked bodies", "[serve]") {
  const char* bad[] = {
      "xyz\r\n",         // not hexadecimal
      "\r\n",            // no size
      "5\nhello\r\n",    // a bare LF
      "3\r\nhello\r\n",  // more data than its size
      "-1\r\n",          // negative
  };
  for (const char* text : bad) {
    INFO(text);
    ChunkedBody body(100);
    size_t used = 0;
    CHECK(body.feed(text, used) == ChunkedBody::State::malformed);
    CHECK_FALSE(body.error().empty());
  }
  ChunkedBody long_line(100);
  size_t used = 0;
  CHECK(long_line.feed("1" + std::string(5000, ' '), used) == ChunkedBody::State::malformed);
}
