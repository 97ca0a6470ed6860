// The body framing of a request head checked and rewritten (apps/serve/request_head.h).
// Stricter than the HTTP library (which takes the first of two Content-Lengths,
// reads "-1" as 2^64 - 1, url-decodes header values and reads a body without any
// framing until the connection closes), so that the two can never disagree on
// where a body ends.
#include "apps/serve/request_head.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace ember::apps::serve {
namespace {

struct HeaderLine {
  std::string_view name, value, whole;  // whole: with its "\r\n"
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The header lines after the request line; false (with `why`) for a line that is not
// "name: value" with a name free of blanks, or that holds a bare CR or LF.
bool header_lines(std::string_view head, std::vector<HeaderLine>& out, std::string& why) {
  size_t pos = head.find("\r\n") + 2;  // past the request line
  while (pos < head.size()) {
    const size_t eol = head.find("\r\n", pos);
    const std::string_view line = head.substr(pos, eol - pos);
    const std::string_view whole = head.substr(pos, eol + 2 - pos);
    pos = eol + 2;
    if (line.empty()) break;  // the blank line
    if (line.find_first_of("\r\n") != std::string_view::npos) {
      why = "a header line holds a bare CR or LF (lines end with CRLF)";
      return false;
    }
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || name.empty() ||
        name.find_first_of(" \t") != std::string_view::npos) {
      why = "a header line is not 'Name: value': '" + std::string(line.substr(0, 80)) + "'";
      return false;
    }
    out.push_back({name, trim(line.substr(colon + 1)), whole});
  }
  return true;
}

// Digits only; saturates at UINT64_MAX (any such length is over the limit anyway).
std::optional<uint64_t> length_value(std::string_view v) {
  if (v.empty() || v.size() > 40) return std::nullopt;
  uint64_t n = 0;
  for (const char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    n = n > (UINT64_MAX - d) / 10 ? UINT64_MAX : n * 10 + d;
  }
  return n;
}

HeadFraming refuse(int status, std::string message) {
  HeadFraming f;
  f.status = status;
  f.code = status == 413   ? "request_too_large"
           : status == 501 ? "unsupported_transfer_encoding"
                           : "invalid_http_framing";
  f.message = std::move(message);
  return f;
}

}  // namespace

size_t head_end(std::string_view bytes) {
  const size_t at = bytes.find("\r\n\r\n");
  return at == std::string_view::npos ? at : at + 4;
}

HeadFraming check_framing(std::string_view head, size_t max_body_bytes) {
  std::vector<HeaderLine> lines;
  std::string why;
  if (!header_lines(head, lines, why)) return refuse(400, why);
  HeadFraming f;
  f.http10 = head.substr(0, head.find("\r\n")).ends_with(" HTTP/1.0");
  std::optional<uint64_t> length;
  int encodings = 0;
  for (const HeaderLine& h : lines) {
    const std::string name = lower(h.name);
    if (name == "content-length") {
      const std::optional<uint64_t> n = length_value(h.value);
      if (!n) {
        return refuse(400, "Content-Length '" + std::string(h.value.substr(0, 40)) +
                               "' is not a non-negative integer");
      }
      if (length && *length != *n) {
        return refuse(400, "the request has conflicting Content-Length headers");
      }
      length = n;
    } else if (name == "transfer-encoding") {
      if (f.http10) {
        return refuse(400, "an HTTP/1.0 request cannot have a Transfer-Encoding (send the "
                           "body with a Content-Length)");
      }
      ++encodings;
      if (lower(h.value) != "chunked" || encodings > 1) {
        return refuse(501, "Transfer-Encoding '" + std::string(h.value.substr(0, 40)) +
                               "' is not supported (only a single 'chunked')");
      }
      f.chunked = true;
    } else if (name == "expect") {
      f.expect_continue = !f.http10 && lower(h.value) == "100-continue";
    }
  }
  if (length && f.chunked) {
    return refuse(400, "the request has both Content-Length and Transfer-Encoding: chunked");
  }
  if (length && *length > max_body_bytes) {
    return refuse(413, "the request body is larger than this server's limit of " +
                           std::to_string(max_body_bytes) + " bytes (--max-body-bytes)");
  }
  f.content_length = length.value_or(0);
  return f;
}

std::string with_content_length(std::string_view head, uint64_t n, bool drop_expect) {
  std::vector<HeaderLine> lines;
  std::string why;
  const size_t first = head.find("\r\n") + 2;
  std::string out(head.substr(0, first));
  header_lines(head, lines, why);
  for (const HeaderLine& h : lines) {
    const std::string name = lower(h.name);
    if (name == "content-length" || name == "transfer-encoding") continue;
    if (drop_expect && name == "expect") continue;
    out += h.whole;
  }
  out += "Content-Length: " + std::to_string(n) + "\r\n\r\n";
  return out;
}

}  // namespace ember::apps::serve
