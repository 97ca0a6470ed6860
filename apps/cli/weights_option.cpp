// --weights (apps/cli/weights_option.h).
#include "apps/cli/weights_option.h"

namespace ember::apps {

void add_weights_option(CLI::App* sub, std::string& weights) {
  sub->add_option("--weights", weights,
                  "the inference weights' type, converted once at load: float32, bf16 (half the "
                  "bytes a decode step reads) or int8 (GGUF Q8_0 blocks; about a quarter)")
      ->check(CLI::IsMember({"float32", "bf16", "int8"}))
      ->capture_default_str();
}

}  // namespace ember::apps
