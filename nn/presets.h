// Shipped model presets (configs/*.json, compiled into the binary) and the
// one way every command resolves a model config: --config FILE or --preset NAME.
#pragma once
#include <map>
#include <string>

#include "nn/config.h"

namespace ember::apps {

// name -> JSON text of every shipped preset.
const std::map<std::string, std::string>& preset_texts();
nn::ModelConfig preset_config(const std::string& name);

}  // namespace ember::apps
