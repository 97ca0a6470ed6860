// Held-out perplexity of a small trained model per inference weight type (`ember evaluate
// --weights`, docs/performance.md#weight-types): bf16 within 0.5% of float32, int8 within 2%;
// and each within 0.1% of a float64 training forward over the SAME rounded weights, so the
// kernels add no error of their own beyond their rounding (int8: its activation blocks).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>

#include "apps/common/model_io.h"
#include "apps/evaluate/perplexity.h"
#include "autograd/grad_mode.h"
#include "cli_run.h"
#include "inference/model_runner/paged_forward.h"
#include "temp_dir.h"

using namespace ember;
using kernels::WeightType;

namespace {

// Lines of a small grammar: the first 320 train, the last 80 are held out.
std::string corpus(int first, int last) {
  const char* adj[] = {"quick", "lazy", "brown", "small", "old", "bright", "quiet"};
  const char* animal[] = {"fox", "dog", "cat", "horse", "bird"};
  const char* thing[] = {"fence", "river", "wall", "log"};
  std::string s;
  for (int i = first; i < last; ++i) {
    s += "line " + std::to_string(i) + ": the " + adj[i % 7] + " " + animal[i % 5] + " jumps over the " +
         adj[(i * 3) % 7] + " " + thing[i % 4] + ".\n";
  }
  return s;
}

// The float64 model whose weights are the InferenceModel's as it multiplies by them.
nn::Transformer rounded_float64(const nn::Transformer& model, const inference::InferenceModel& im) {
  nn::Transformer m64(model.config(), 0, DType::Float64);
  std::map<std::string, Tensor> sd = model.state_dict();
  for (auto& [name, t] : sd) {
    const auto it = im.packed().find(name);
    t = (it != im.packed().end() ? it->second.to_float32() : t).to(DType::Float64);
  }
  m64.load_state_dict(sd);
  return m64;
}

}  // namespace

TEST_CASE("weights: held-out perplexity per weight type against float32 and float64 on the same rounded weights",
          "[weights][perplexity]") {
  const testing::TempDir dir("weights_ppl");
  dir.write("train.txt", corpus(0, 320));
  dir.write("tiny.json", R"({"vocab_size": 256, "d_model": 64, "n_layers": 2, "n_heads": 4,
    "ffn_hidden": 128, "max_seq_len": 64})");
  const testing::CliRun train = testing::run_ember(
      "train --config " + (dir / "tiny.json") + " --data " + (dir / "train.txt") + " --out " + (dir / "run") +
      " --batch-size 8 --seq-len 64 --warmup 10 --eval-batches 1 --steps 300 --lr 3e-3");
  REQUIRE(train.code == 0);
  apps::LoadedModel lm = apps::load_model(dir / "run/step_00000300.h5");
  NoGradGuard no_grad;
  const std::string held = corpus(320, 400);
  std::map<WeightType, double> ppl;
  for (WeightType type : {WeightType::Float32, WeightType::BFloat16, WeightType::Int8}) {
    const inference::InferenceModel im(*lm.model, type);
    ppl[type] = apps::evaluate_text(*lm.model, lm.tokenizer, held, 64, 32, 4, {}, &im).perplexity;
    nn::Transformer m64 = rounded_float64(*lm.model, im);
    const double ref = apps::evaluate_text(m64, lm.tokenizer, held, 64, 32, 4).perplexity;
    INFO(kernels::weight_type_name(type) << ": perplexity " << ppl[type] << ", float64 on its weights " << ref);
    CHECK(std::abs(ppl[type] / ref - 1) < 1e-3);
  }
  INFO("float32 " << ppl[WeightType::Float32] << ", bf16 " << ppl[WeightType::BFloat16] << ", int8 "
                  << ppl[WeightType::Int8]);
  CHECK(ppl[WeightType::Float32] < 3.0);  // the model learned the grammar
  CHECK(std::abs(ppl[WeightType::BFloat16] / ppl[WeightType::Float32] - 1) < 0.005);
  CHECK(std::abs(ppl[WeightType::Int8] / ppl[WeightType::Float32] - 1) < 0.02);
}
