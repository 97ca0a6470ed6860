// QLoRA's streamed base load (nn::load_model_weights with quantize nf4 / nf4-dq: a model built
// without initializing its weights, each block quantized as soon as it is read) against the
// float32 path it replaces (the whole model initialized, then loaded, then quantized by
// add_adapters): bit-identical tensors, NF4 codes and absmaxes, and training losses.
#include <catch2/catch.hpp>

#include "autograd/ops.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"
#include "nn/adapters/lora.h"
#include "nn/skip_init.h"
#include "optim/adamw.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::nn;
using ember::testing::TempDir;

namespace {

ModelConfig small_config(bool tied, bool moe) {
  std::string j = R"({"vocab_size": 37, "d_model": 16, "n_layers": 3, "n_heads": 2, "n_kv_heads": 1,
                      "ffn_hidden": 24, "max_seq_len": 16, "bias": true, "tie_embeddings": )" +
                  std::string(tied ? "true" : "false");
  if (moe) j += R"(, "moe": {"n_experts": 4, "top_k": 2, "n_shared": 1, "expert_hidden": 12})";
  return ModelConfig::from_json(j + "}");
}

LoRAConfig every_target() {
  LoRAConfig l;
  l.r = 3;
  l.alpha = 5;
  l.targets = kLoRATargets;
  return l;
}

// Every NF4 base of the model's LoRALinears, by module path, depth first.
void collect_nf4(const Module& m, const std::string& prefix,
                 std::vector<std::pair<std::string, const kernels::Nf4Tensor*>>& out) {
  for (const auto& [name, c] : m.children()) {
    if (const auto* lora = dynamic_cast<const LoRALinear*>(c.get()); lora && lora->nf4_base()) {
      out.emplace_back(prefix + name, lora->nf4_base()->weight().get());
    }
    collect_nf4(*c, prefix + name + ".", out);
  }
}

std::vector<double> train_losses(Transformer& model) {
  optim::AdamW opt(optim::decay_groups(trainable_parameters(model), 0.1));
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> ids(2 * 9), targets(2 * 9);
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int64_t>((i * 7 + step * 13) % 39);
      targets[i] = static_cast<int64_t>((i * 5 + step * 3 + 1) % 39);
    }
    opt.zero_grad();
    const Variable loss = model.loss(model.forward(Tensor::from_vector(ids, {2, 9})),
                                     Tensor::from_vector(targets, {2, 9})).total;
    loss.backward();
    opt.step(1e-2);
    losses.push_back(loss.data().to_vector<double>()[0]);
  }
  return losses;
}

}  // namespace

TEST_CASE("SkipInitGuard: weights left uninitialized, the init stream advanced alike", "[qlora]") {
  Generator a(4), b(4);
  const Tensor drawn = init_normal({3, 5}, a, DType::Float32, 0.02);
  {
    SkipInitGuard skip;
    CHECK(SkipInitGuard::active());
    CHECK(init_normal({3, 5}, b, DType::Float32, 0.02).shape() == drawn.shape());
  }
  CHECK_FALSE(SkipInitGuard::active());
  CHECK(a.offset == b.offset);
}

TEST_CASE("QLoRA streamed load equals the float32 path: tensors, NF4 contents, losses",
          "[qlora]") {
  for (const char* quant : {"nf4", "nf4-dq"}) {
    for (const bool moe : {false, true}) {
      for (const bool tied : {false, true}) {
        INFO(quant << (moe ? " moe" : " dense") << (tied ? " tied" : " untied"));
        const ModelConfig cfg = small_config(tied, moe);
        TempDir dir("qlora");
        const Transformer base(cfg, 5);
        Checkpoint c;
        c.config = cfg;
        c.model = base.state_dict();
        write_checkpoint(dir / "base.h5", c);

        Transformer before(cfg, 7);
        before.load_state_dict(base.state_dict());
        const auto after = load_model_weights(cfg, 7, dir / "base.h5", quant);
        for (Transformer* m : {&before, after.get()}) {
          add_vocab_rows(*m, 2, 7);
          add_adapters(*m, every_target(), quant, 7);
        }
        const auto sb = before.state_dict(), sa = after->state_dict();
        REQUIRE(sa.size() == sb.size());
        for (const auto& [name, t] : sb) {
          INFO(name);
          CHECK(sa.at(name).to_vector<float>() == t.to_vector<float>());
        }
        std::vector<std::pair<std::string, const kernels::Nf4Tensor*>> nb, na;
        collect_nf4(before, "", nb);
        collect_nf4(*after, "", na);
        REQUIRE(na.size() == nb.size());
        CHECK(!nb.empty());
        for (size_t i = 0; i < nb.size(); ++i) {
          INFO(nb[i].first);
          CHECK(na[i].first == nb[i].first);
          CHECK(na[i].second->codes == nb[i].second->codes);
          CHECK(na[i].second->absmax == nb[i].second->absmax);
          CHECK(na[i].second->absmax_q == nb[i].second->absmax_q);
          CHECK(na[i].second->absmax_scale == nb[i].second->absmax_scale);
          CHECK(na[i].second->absmax_mean == nb[i].second->absmax_mean);
        }
        CHECK(train_losses(*after) == train_losses(before));
      }
    }
  }
}
