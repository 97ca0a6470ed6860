// An HTTP error answered in OpenAI's shape, {"error": {"message", "type",
// "param", "code"}}: 400 a bad request field, 401 a missing or wrong API key,
// 404 an unknown route or model, 413 a body over the limit, 429 a full queue,
// 503 the server shutting down. Also the JSON text of any value (bad UTF-8 replaced).
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace ember::apps::serve {

class ApiError : public std::runtime_error {
 public:
  // type: "" picks the status's usual one (error_type_for).
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "",
           std::string type = "");
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // "" -> null
  const std::string& code() const { return code_; }    // "" -> null

 private:
  int status_;
  std::string type_, param_, code_;
};

// A 400 invalid_request_error naming the field at fault.
ApiError bad_request(const std::string& message, const std::string& param = "",
                     const std::string& code = "");

// "invalid_request_error" (4xx), "rate_limit_exceeded" (429), "server_error" (5xx).
std::string error_type_for(int status);

// {"error": {...}} of e.
nlohmann::ordered_json error_json(const ApiError& e);

// Compact JSON text; bytes that are not UTF-8 (a token holding part of a
// character) become U+FFFD instead of throwing.
std::string json_text(const nlohmann::json& j);
std::string json_text(const nlohmann::ordered_json& j);

}  // namespace ember::apps::serve
