// A request's body framing settled before the HTTP library reads it: the head
// collected by the connection gate is checked (apps/serve/request_head.h), a
// chunked body is decoded here under --max-body-bytes, and the library is handed a
// head with a plain Content-Length (0 for a request without a body, so a POST
// without one is answered at once). A refused request reaches the library as its
// head alone, with Content-Length 0, and is answered by the refusal.
#pragma once
#include <cstddef>
#include <string>

#include "apps/serve/deadline_stream.h"

namespace ember::apps::serve {

struct BodyOutcome {
  bool client_gone = false;  // the connection ended mid-body: nothing to answer
  int status = 0;            // else 0: the library reads on; or the refusal's status
  std::string code, message;
  bool timed_out = false;  // the body did not arrive before the request's deadline (408)
};

// `strm` holds the whole head first; on return it holds what the library is to read.
BodyOutcome settle_body(DeadlineStream& strm, size_t max_body_bytes);

}  // namespace ember::apps::serve
