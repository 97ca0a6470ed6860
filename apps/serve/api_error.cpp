// OpenAI-shaped errors and the JSON text of responses (apps/serve/api_error.h).
#include "apps/serve/api_error.h"

namespace ember::apps::serve {

ApiError::ApiError(int status, const std::string& message, std::string param, std::string code,
                   std::string type)
    : std::runtime_error(message),
      status_(status),
      type_(type.empty() ? error_type_for(status) : std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

ApiError bad_request(const std::string& message, const std::string& param,
                     const std::string& code) {
  return ApiError(400, message, param, code);
}

std::string error_type_for(int status) {
  if (status == 429) return "rate_limit_exceeded";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

nlohmann::ordered_json error_json(const ApiError& e) {
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(s);
  };
  nlohmann::ordered_json body;
  body["message"] = e.what();
  body["type"] = e.type();
  body["param"] = or_null(e.param());
  body["code"] = or_null(e.code());
  return {{"error", std::move(body)}};
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_text(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace ember::apps::serve
