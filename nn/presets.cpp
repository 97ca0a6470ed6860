// Preset lookup with an error that lists the known names.
#include "nn/presets.h"

#include "core/error.h"

namespace ember::apps {

nn::ModelConfig preset_config(const std::string& name) {
  const auto& presets = preset_texts();
  auto it = presets.find(name);
  if (it == presets.end()) {
    std::string known;
    for (const auto& [n, text] : presets) known += (known.empty() ? "" : ", ") + n;
    throw Error("--preset: unknown preset \"" + name + "\" (known: " + known + ")");
  }
  return nn::ModelConfig::from_json(it->second, "preset " + name);
}

}  // namespace ember::apps
