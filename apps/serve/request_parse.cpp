// Field-by-field parsing of OpenAI completion and chat requests
// (apps/serve/request_parse.h). null counts as absent for optional fields, as
// the OpenAI API does; fields of the API this server does not implement are
// accepted only at their neutral value (n 1, penalties 0, no logit_bias).
#include "apps/serve/request_parse.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/serve/api_error.h"

namespace ember::apps::serve {
namespace {

using json = nlohmann::json;

std::string kind_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

ApiError wrong_type(const std::string& field, const std::string& expected, const json& v) {
  return bad_request(field + " must be " + expected + ", got " + kind_of(v), field, "invalid_type");
}

// "must be >= LO" for a value under a range open above, else "between LO and HI".
ApiError out_of_range(const std::string& field, int64_t lo, int64_t hi, const std::string& got,
                      bool below) {
  return bad_request(field + " must be " +
                         (below && hi == INT64_MAX && lo != INT64_MIN
                              ? ">= " + std::to_string(lo)
                              : "between " + std::to_string(lo) + " and " + std::to_string(hi)) +
                         ", got " + got,
                     field, "invalid_value");
}

// An integer within [lo, hi]. An integer too large for 64 bits (nlohmann reads one past
// 2^64 as a float: any float of that size is a whole number) is out of range, not of a
// wrong type.
int64_t integer_in(const json& v, const std::string& field, int64_t lo = INT64_MIN,
                   int64_t hi = INT64_MAX) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw out_of_range(field, lo, hi, std::to_string(v.get<uint64_t>()), false);
  }
  if (v.is_number_float() && std::fabs(v.get<double>()) >= 0x1p63) {
    throw out_of_range(field, lo, hi, v.dump(), v.get<double>() < 0);
  }
  if (!v.is_number_integer()) throw wrong_type(field, "an integer", v);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw out_of_range(field, lo, hi, std::to_string(x), x < lo);
  return x;
}

int64_t integer(const json& v, const std::string& field) {
  return integer_in(v, field);
}

double number(const json& v, const std::string& field) {
  if (!v.is_number()) throw wrong_type(field, "a number", v);
  return v.get<double>();
}

bool boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) throw wrong_type(field, "a boolean", v);
  return v.get<bool>();
}

std::string string(const json& v, const std::string& field) {
  if (!v.is_string()) throw wrong_type(field, "a string", v);
  return v.get<std::string>();
}

std::string number_text(double x) {
  json j = x;
  return j.dump();
}

// stop: a string or a list of at most 4 non-empty strings of at most 256 bytes.
std::vector<std::string> stop_strings(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > kMaxStopStrings) {
      throw bad_request("stop holds at most " + std::to_string(kMaxStopStrings) + " strings, got " +
                            std::to_string(v.size()),
                        "stop", "invalid_value");
    }
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(string(v[i], "stop[" + std::to_string(i) + "]"));
  } else {
    throw wrong_type("stop", "a string or a list of strings", v);
  }
  for (const std::string& s : out) {
    if (s.empty()) throw bad_request("a stop string must not be empty", "stop", "invalid_value");
    if (s.size() > kMaxStopBytes) {
      throw bad_request("a stop string holds at most " + std::to_string(kMaxStopBytes) +
                            " bytes, got " + std::to_string(s.size()),
                        "stop", "invalid_value");
    }
  }
  return out;
}

std::vector<int64_t> token_ids(const json& v, const std::string& field) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    ids.push_back(integer_in(v[i], field + "[" + std::to_string(i) + "]", 0, INT64_MAX));
  }
  if (ids.empty())
    throw bad_request(field + " is an empty list of token ids", "prompt", "invalid_value");
  return ids;
}

// prompt: a string, a list of token ids, or a list holding one of those (one prompt per request).
void parse_prompt(const json& v, ApiRequest& r) {
  if (v.is_string()) {
    r.prompt = v.get<std::string>();
    return;
  }
  if (!v.is_array() || v.empty()) throw wrong_type("prompt", "a string or a list of token ids", v);
  if (v[0].is_number_integer()) {
    r.prompt_ids = token_ids(v, "prompt");
    return;
  }
  if (v.size() > 1) {
    throw bad_request("prompt holds " + std::to_string(v.size()) +
                          " prompts; this server takes one prompt per request",
                      "prompt", "invalid_value");
  }
  if (v[0].is_string()) {
    r.prompt = v[0].get<std::string>();
  } else if (v[0].is_array()) {
    r.prompt_ids = token_ids(v[0], "prompt[0]");
  } else {
    throw wrong_type("prompt[0]", "a string or a list of token ids", v[0]);
  }
}

// content: a string, or a list of {"type": "text", "text": ...} parts joined.
std::string message_content(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw wrong_type(field, "a string or a list of text parts", v);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = field + "[" + std::to_string(i) + "]";
    const json& p = v[i];
    if (!p.is_object() || !p.contains("type") || p["type"] != "text" || !p.contains("text") ||
        p.size() != 2) {
      throw bad_request(
          part + " must be {\"type\": \"text\", \"text\": ...} (only text parts are supported)",
          field, "invalid_value");
    }
    text += string(p["text"], part + ".text");
  }
  return text;
}

void parse_messages(const json& v, ApiRequest& r) {
  if (!v.is_array()) throw wrong_type("messages", "a list of messages", v);
  if (v.empty()) throw bad_request("messages must not be empty", "messages", "invalid_value");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!v[i].is_object()) throw wrong_type(field, "an object", v[i]);
    data::ChatMessage m;
    bool has_role = false, has_content = false;
    for (const auto& [key, value] : v[i].items()) {
      if (key == "role") {
        m.role = string(value, field + ".role");
        has_role = true;
      } else if (key == "content") {
        m.content = message_content(value, field + ".content");
        has_content = true;
      } else {
        throw bad_request(
            "unknown field " + field + "." + key + " (a message has role and content)",
            field + "." + key, "unknown_field");
      }
    }
    if (!has_role || !has_content) {
      throw bad_request(field + " needs " + (has_role ? "content" : "a role"), field,
                        "missing_field");
    }
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      throw bad_request(field + ".role '" + m.role + "' is unknown (system, user or assistant)",
                        field + ".role", "invalid_value");
    }
    r.messages.push_back(std::move(m));
  }
}

void require_neutral(const json& v, const std::string& field, double neutral) {
  if (number(v, field) != neutral) {
    throw bad_request(field + " is not supported (only " + number_text(neutral) + ")", field,
                      "unsupported_value");
  }
}

struct ParseState {
  ApiRequest r;
  std::optional<bool> chat_logprobs;
  std::optional<int64_t> top_logprobs, max_completion_tokens;
  bool has_stream_options = false;
  bool has_prompt = false;
};

using FieldParser = std::function<void(const json&, ParseState&)>;

std::map<std::string, FieldParser> common_fields() {
  return {
      {"model", [](const json& v, ParseState& s) { s.r.model = string(v, "model"); }},
      {"max_tokens",
       [](const json& v, ParseState& s) {
         s.r.max_tokens = integer_in(v, "max_tokens", 0, INT64_MAX);
       }},
      {"temperature",
       [](const json& v, ParseState& s) {
         s.r.temperature = number(v, "temperature");
         if (s.r.temperature < 0) {
           throw bad_request("temperature must be >= 0, got " + number_text(s.r.temperature),
                             "temperature", "invalid_value");
         }
       }},
      {"top_p",
       [](const json& v, ParseState& s) {
         s.r.top_p = number(v, "top_p");
         if (!(s.r.top_p > 0 && s.r.top_p <= 1)) {
           throw bad_request("top_p must be in (0, 1], got " + number_text(s.r.top_p), "top_p",
                             "invalid_value");
         }
       }},
      {"top_k",
       [](const json& v, ParseState& s) { s.r.top_k = integer_in(v, "top_k", -1, INT64_MAX); }},
      {"seed", [](const json& v, ParseState& s) { s.r.seed = integer(v, "seed"); }},
      {"stop", [](const json& v, ParseState& s) { s.r.stop = stop_strings(v); }},
      {"stream", [](const json& v, ParseState& s) { s.r.stream = boolean(v, "stream"); }},
      {"stream_options",
       [](const json& v, ParseState& s) {
         if (!v.is_object()) throw wrong_type("stream_options", "an object", v);
         for (const auto& [key, value] : v.items()) {
           if (key != "include_usage") {
             throw bad_request("unknown field stream_options." + key + " (only include_usage)",
                               "stream_options." + key, "unknown_field");
           }
           if (!value.is_null()) s.r.include_usage = boolean(value, "stream_options.include_usage");
         }
         s.has_stream_options = true;
       }},
      {"n",
       [](const json& v, ParseState&) {
         if (integer(v, "n") != 1) {
           throw bad_request("n must be 1: this server returns one choice per request", "n",
                             "unsupported_value");
         }
       }},
      {"user", [](const json& v, ParseState&) { string(v, "user"); }},
      {"presence_penalty",
       [](const json& v, ParseState&) { require_neutral(v, "presence_penalty", 0); }},
      {"frequency_penalty",
       [](const json& v, ParseState&) { require_neutral(v, "frequency_penalty", 0); }},
      {"logit_bias",
       [](const json& v, ParseState&) {
         if (!v.is_object() || !v.empty()) {
           throw bad_request("logit_bias is not supported", "logit_bias", "unsupported_value");
         }
       }},
  };
}

std::map<std::string, FieldParser> endpoint_fields(Endpoint endpoint) {
  if (endpoint == Endpoint::Completions) {
    return {
        {"prompt",
         [](const json& v, ParseState& s) {
           parse_prompt(v, s.r);
           s.has_prompt = true;
         }},
        {"echo", [](const json& v, ParseState& s) { s.r.echo = boolean(v, "echo"); }},
        {"logprobs",
         [](const json& v, ParseState& s) {
           s.r.logprobs = integer_in(v, "logprobs", 0, kMaxLogprobs);
         }},
        {"best_of",
         [](const json& v, ParseState&) {
           if (integer(v, "best_of") != 1) {
             throw bad_request("best_of must be 1", "best_of", "unsupported_value");
           }
         }},
        {"suffix",
         [](const json& v, ParseState&) {
           if (!string(v, "suffix").empty())
             throw bad_request("suffix is not supported", "suffix", "unsupported_value");
         }},
    };
  }
  return {
      {"messages", [](const json& v, ParseState& s) { parse_messages(v, s.r); }},
      {"logprobs", [](const json& v, ParseState& s) { s.chat_logprobs = boolean(v, "logprobs"); }},
      {"top_logprobs",
       [](const json& v, ParseState& s) {
         s.top_logprobs = integer_in(v, "top_logprobs", 0, kMaxLogprobs);
       }},
      {"max_completion_tokens",
       [](const json& v, ParseState& s) {
         s.max_completion_tokens = integer_in(v, "max_completion_tokens", 0, INT64_MAX);
       }},
  };
}

// The checks that involve more than one field.
void check_together(ParseState& s) {
  ApiRequest& r = s.r;
  if (r.endpoint == Endpoint::Completions && !s.has_prompt) {
    throw bad_request("prompt is required", "prompt", "missing_field");
  }
  if (r.endpoint == Endpoint::Chat) {
    if (r.messages.empty()) throw bad_request("messages is required", "messages", "missing_field");
    if (s.top_logprobs && !s.chat_logprobs.value_or(false)) {
      throw bad_request("top_logprobs needs logprobs: true", "top_logprobs", "invalid_value");
    }
    if (s.chat_logprobs.value_or(false)) r.logprobs = s.top_logprobs.value_or(0);
    if (s.max_completion_tokens) {
      if (r.max_tokens && *r.max_tokens != *s.max_completion_tokens) {
        throw bad_request("max_tokens and max_completion_tokens differ", "max_completion_tokens",
                          "invalid_value");
      }
      r.max_tokens = s.max_completion_tokens;
    }
  }
  if (s.has_stream_options && !r.stream) {
    throw bad_request("stream_options is only allowed with stream: true", "stream_options",
                      "invalid_value");
  }
}

}  // namespace

ApiRequest parse_request(std::string_view body, Endpoint endpoint) {
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw bad_request("the request body is not valid JSON", "", "invalid_json");
  if (!doc.is_object())
    throw bad_request("the request body must be a JSON object, got " + kind_of(doc));
  const std::map<std::string, FieldParser> common = common_fields(),
                                           own = endpoint_fields(endpoint);
  ParseState s;
  s.r.endpoint = endpoint;
  for (const auto& [key, value] : doc.items()) {
    const FieldParser* parse = nullptr;
    if (auto it = own.find(key); it != own.end()) parse = &it->second;
    if (auto it = common.find(key); it != common.end()) parse = &it->second;
    if (!parse) throw bad_request("unknown field '" + key + "'", key, "unknown_field");
    if (value.is_null() && key != "prompt" && key != "messages") continue;  // null: absent
    (*parse)(value, s);
  }
  check_together(s);
  return s.r;
}

}  // namespace ember::apps::serve
