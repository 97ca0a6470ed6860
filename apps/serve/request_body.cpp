// The body framing of a request settled before the library reads it
// (apps/serve/request_body.h).
#include "apps/serve/request_body.h"

#include <array>

#include "apps/serve/chunked_body.h"
#include "apps/serve/request_head.h"

namespace ember::apps::serve {
namespace {

BodyOutcome refused(int status, std::string code, std::string message) {
  BodyOutcome r;
  r.status = status;
  r.code = std::move(code);
  r.message = std::move(message);
  return r;
}

// Decodes the chunked body that follows the head (`rest` already read, then the socket);
// on success `strm` hands out the body, then the bytes after it.
BodyOutcome read_chunked(DeadlineStream& strm, std::string rest, ChunkedBody& body) {
  size_t used = 0;
  body.feed(rest, used);
  std::array<char, 16384> buf;
  while (body.state() == ChunkedBody::State::more) {
    const ssize_t n = strm.read(buf.data(), buf.size());
    if (n <= 0) {
      BodyOutcome r;
      r.client_gone = n == 0;  // else a read timed out
      return r;
    }
    rest.assign(buf.data(), static_cast<size_t>(n));
    body.feed(rest, used);
  }
  if (body.state() == ChunkedBody::State::done) strm.put_back(rest.substr(used));
  return {};
}

}  // namespace

BodyOutcome settle_body(DeadlineStream& strm, size_t max_body_bytes) {
  std::string bytes = strm.take_pending();
  const size_t end = head_end(bytes);
  const std::string_view head = std::string_view(bytes).substr(0, end);
  const HeadFraming f = check_framing(head, max_body_bytes);
  if (f.status != 0) {
    strm.put_back(with_content_length(head, 0, true));
    return refused(f.status, f.code, f.message);
  }
  if (!f.chunked) {
    // The library would answer an HTTP/1.0 request's Expect with a 100 Continue.
    strm.put_back(with_content_length(head, f.content_length, f.http10) + bytes.substr(end));
    return {};
  }
  // The client waits for a 100 Continue before it sends a chunked body.
  if (f.expect_continue) strm.write("HTTP/1.1 100 Continue\r\n\r\n", 25);
  ChunkedBody body(max_body_bytes);
  const std::string new_head = with_content_length(head, 0, true);
  BodyOutcome r = read_chunked(strm, bytes.substr(end), body);
  if (body.state() == ChunkedBody::State::done) {
    strm.put_back(with_content_length(head, body.body().size(), true) + body.body());
    return {};
  }
  strm.take_pending();
  strm.put_back(new_head);
  if (body.state() == ChunkedBody::State::too_large) {
    return refused(413, "request_too_large",
                   "the request body is larger than this server's limit of " +
                       std::to_string(max_body_bytes) + " bytes (--max-body-bytes)");
  }
  if (body.state() == ChunkedBody::State::malformed) {
    return refused(400, "invalid_http_framing",
                   "the chunked request body is malformed: " + body.error());
  }
  if (!r.client_gone) r.timed_out = true;
  return r;
}

}  // namespace ember::apps::serve
