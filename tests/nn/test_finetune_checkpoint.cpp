// Fine-tune checkpoints (nn/checkpoint_file.h, docs/formats.md#fine-tune-checkpoints): adapters only in
// /model plus root attrs base and base_sha256; model_from_checkpoint rebuilds
// base + added rows + adapters with the same logits; check_model_tensors wants
// exactly the trainable tensors; a missing or changed base is one clear error, a moved one is
// read from the path given, checked by its sha256.
#include <catch2/catch.hpp>
#include <filesystem>

#include "core/io/sha256.h"
#include "nn/adapters/adapters.h"
#include "nn/checkpoint_file.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::nn;
using ember::testing::TempDir;

namespace {

ModelConfig base_config(bool tied) {
  return ModelConfig::from_json(
      std::string(R"({"vocab_size": 30, "d_model": 16, "n_layers": 2, "n_heads": 2,
      "ffn_hidden": 24, "max_seq_len": 16, "moe": {"n_experts": 3, "top_k": 2, "every": 2}, "tie_embeddings": )") +
      (tied ? "true}" : "false}"));
}

std::string write_base(const TempDir& dir, bool tied, uint64_t seed) {
  Transformer model(base_config(tied), seed);
  Checkpoint c;
  c.config = model.config();
  c.model = model.state_dict();
  const std::string path = std::filesystem::absolute(dir / "base.h5").string();
  write_checkpoint(path, c);
  return path;
}

// A fine-tune of base (added rows, every target, quantize) with trained-looking adapters.
Checkpoint finetune_of(const std::string& base, int64_t added, const std::string& quantize,
                       std::unique_ptr<Transformer>& model) {
  model = model_from_checkpoint(read_checkpoint(base), base);
  if (added > 0) add_vocab_rows(*model, added, 3);
  LoRAConfig lora;
  lora.r = 2;
  lora.targets = kLoRATargets;
  add_adapters(*model, lora, quantize, 4);
  uint64_t seed = 60;
  Checkpoint c;
  for (const auto& [name, v] : trainable_parameters(*model)) {
    v.data().copy_(Tensor::randn(v.shape(), seed++, 0, DType::Float32, 0, 0.2));
    c.model[name] = v.data();
  }
  c.config = model->config();
  c.base = base;
  c.base_sha256 = sha256_file(base);
  return c;
}

Tensor ids() {
  std::vector<int64_t> v{1, 5, 29, 7, 3, 0, 2, 9};
  return Tensor::from_vector(v, {2, 4});
}

}  // namespace

TEST_CASE("fine-tune checkpoint round trip gives the same logits", "[checkpoint][adapters]") {
  for (bool tied : {true, false}) {
    for (const char* quant : {"none", "nf4-dq"}) {
      INFO("tied " << tied << " " << quant);
      TempDir dir("ftckpt");
      const std::string base = write_base(dir, tied, 1);
      std::unique_ptr<Transformer> model;
      Checkpoint c = finetune_of(base, 2, quant, model);
      model->eval();
      const std::string path = dir / "ft.h5";
      write_checkpoint(path, c);
      const Checkpoint back = read_checkpoint(path);
      CHECK(back.base == base);
      CHECK(back.base_sha256 == c.base_sha256);
      CHECK(back.base_sha256.size() == 64);
      CHECK(back.config.lora->r == 2);
      CHECK(back.config.quantize == quant);
      CHECK(back.config.vocab_size == 32);
      CHECK(back.model.size() == c.model.size());
      CHECK(back.model.count("model.embed_tokens.added_rows"));
      CHECK(back.model.count("model.layers.1.mlp.experts.2.down_proj.lora_B.weight"));
      CHECK_NOTHROW(check_model_tensors(back, path));
      const auto loaded = model_from_checkpoint(back, path);
      const Tensor a = loaded->forward(ids()).logits.data(),
                   b = model->forward(ids()).logits.data();
      CHECK(a.to_vector<float>() == b.to_vector<float>());
    }
  }
}

TEST_CASE("fine-tune checkpoint: tensors checked against the trainable ones",
          "[checkpoint][adapters]") {
  TempDir dir("ftckpt");
  const std::string base = write_base(dir, true, 1);
  std::unique_ptr<Transformer> model;
  Checkpoint c = finetune_of(base, 0, "none", model);
  CHECK_NOTHROW(check_model_tensors(c, "ft.h5"));
  Checkpoint extra = c;
  extra.model["model.norm.weight"] = Tensor::ones({16});
  CHECK_THROWS_WITH(check_model_tensors(extra, "ft.h5"),
                    Catch::Contains("ft.h5: unexpected tensor /model/model.norm.weight") &&
                        Catch::Contains("not a trainable tensor"));
  Checkpoint missing = c;
  missing.model.erase("lm_head.lora_A.weight");
  CHECK_THROWS_WITH(check_model_tensors(missing, "ft.h5"),
                    Catch::Contains("missing tensor /model/lm_head.lora_A.weight"));
  CHECK_THROWS_WITH(model_from_checkpoint(missing, "ft.h5"),
                    Catch::Contains("missing tensor /model/lm_head.lora_A.weight"));
}

TEST_CASE("fine-tune checkpoint: a missing or changed base is one error naming it",
          "[checkpoint][adapters]") {
  TempDir dir("ftckpt");
  const std::string base = write_base(dir, false, 1);
  std::unique_ptr<Transformer> model;
  const Checkpoint c = finetune_of(base, 0, "nf4", model);
  const std::string path = dir / "ft.h5";
  write_checkpoint(path, c);
  write_base(dir, false, 2);  // same path, other weights
  CHECK_THROWS_WITH(model_from_checkpoint(read_checkpoint(path), path),
                    Catch::StartsWith(path + ": its base " + base + " has changed (sha256 " +
                                      sha256_file(base) + ", expected " + c.base_sha256 + ")"));
  // No recorded hash: said so, not "(expected )".
  Checkpoint no_hash = c;
  no_hash.base_sha256.clear();
  CHECK_THROWS_WITH(model_from_checkpoint(no_hash, path),
                    path + ": records no sha256 of its base " + base +
                        " (root attribute base_sha256 missing or empty), so no file can be checked "
                        "to be the base it was fine-tuned on");
  std::filesystem::remove(base);
  CHECK_THROWS_WITH(model_from_checkpoint(read_checkpoint(path), path),
                    path + ": its base " + base +
                        " is missing; if it moved, give its new path with --base (checked against "
                        "the sha256 the checkpoint records, " +
                        c.base_sha256 + ")");
  Checkpoint no_base = c;
  no_base.base.clear();
  CHECK_THROWS_WITH(model_from_checkpoint(no_base, path), Catch::Contains("must name its base"));
}

TEST_CASE("fine-tune checkpoint: a moved base is read from the path given, checked by its sha256",
          "[checkpoint][adapters]") {
  TempDir dir("ftckpt");
  const std::string base = write_base(dir, false, 1);
  std::unique_ptr<Transformer> model;
  const Checkpoint c = finetune_of(base, 0, "none", model);
  const std::string path = dir / "ft.h5";
  write_checkpoint(path, c);
  const auto reference = model_from_checkpoint(read_checkpoint(path), path);
  const std::string moved = dir / "moved_base.h5";
  std::filesystem::rename(base, moved);
  const auto loaded = model_from_checkpoint(read_checkpoint(path), path, moved);
  CHECK(loaded->forward(ids()).logits.data().to_vector<float>() ==
        reference->forward(ids()).logits.data().to_vector<float>());
  // Another file there: refused, naming both hashes.
  write_base(dir, false, 2);  // a different base at the old path
  std::filesystem::rename(base, moved);
  CHECK_THROWS_WITH(model_from_checkpoint(read_checkpoint(path), path, moved),
                    "--base " + moved + ": sha256 " + sha256_file(moved) + ", but " + path +
                        " was fine-tuned on a base with sha256 " + c.base_sha256 + " (" + base + ")");
  CHECK_THROWS_WITH(model_from_checkpoint(read_checkpoint(path), path, dir / "nowhere.h5"),
                    "--base " + (dir / "nowhere.h5") + ": no such file");
}

TEST_CASE("plain checkpoints carry no base attrs", "[checkpoint]") {
  TempDir dir("ftckpt");
  const std::string base = write_base(dir, true, 1);
  const Checkpoint c = read_checkpoint(base);
  CHECK(c.base.empty());
  CHECK(c.base_sha256.empty());
  CHECK_FALSE(c.config.lora);
}
