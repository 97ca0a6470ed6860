// The API key of `ember serve --api-key`: every /v1 route needs the header
// `Authorization: Bearer KEY`. Keys are compared in constant time (the time
// depends on the lengths only, never on where the first difference is).
#pragma once
#include <string_view>

namespace ember::apps::serve {

// a == b, looking at every byte of both.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether an Authorization header value carries `key` ("Bearer KEY", the scheme
// case-insensitive). An empty key means no key is needed.
bool authorized(std::string_view authorization, std::string_view key);

}  // namespace ember::apps::serve
