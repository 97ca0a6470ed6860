// AdamW when a MoE expert is idle (no token picks it, so it has no gradient):
// a tiny top-1 MoE Transformer against an independent float64 loop of
// torch.optim.AdamW on the same gradients, the per-parameter step counts in a
// checkpoint, and `ember train` resuming after such a step bit for bit.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "nn/checkpoint_file.h"
#include "apps/train/run_files.h"
#include "apps/train/trainer.h"
#include "core/io/hdf5_file.h"
#include "data/token_shard.h"
#include "nn/transformer.h"
#include "optim/adamw.h"
#include "temp_dir.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

// GQA attention and top-1 MoE layers with six experts: a batch of 6 tokens
// leaves most experts without a token.
const char* kMoEConfig = R"({"vocab_size": 32, "d_model": 16, "n_layers": 2, "n_heads": 4,
  "n_kv_heads": 2, "ffn_hidden": 24, "max_seq_len": 16, "qk_norm": true,
  "moe": {"n_experts": 6, "top_k": 1, "expert_hidden": 16, "aux_loss_coef": 0.01}})";

constexpr double kB1 = 0.9, kB2 = 0.95, kEps = 1e-8, kWd = 0.1;

// torch.optim.AdamW as its documentation states the algorithm, in float64:
// a parameter whose grad is None is skipped whole (no decay, no moment
// update, its state['step'] unchanged); otherwise step += 1 and
//   p -= lr wd p;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
struct TorchAdamWParam {
  std::vector<double> p, m, v;
  int64_t step = 0;
  double weight_decay = 0;

  void update(const std::vector<double>* grad, double lr) {
    if (grad == nullptr) return;
    ++step;
    const double bc1 = 1 - std::pow(kB1, static_cast<double>(step));
    const double bc2 = 1 - std::pow(kB2, static_cast<double>(step));
    for (size_t k = 0; k < p.size(); ++k) {
      const double g = (*grad)[k];
      p[k] -= lr * weight_decay * p[k];
      m[k] = kB1 * m[k] + (1 - kB1) * g;
      v[k] = kB2 * v[k] + (1 - kB2) * g * g;
      p[k] -= lr * (m[k] / bc1) / (std::sqrt(v[k] / bc2) + kEps);
    }
  }
};

Variable total_loss(const nn::Transformer& model, int step) {
  const Tensor ids =
      Tensor::rand({1, 7}, 77, static_cast<uint64_t>(step) * 64, DType::Float64, 0, 32)
          .to(DType::Int64);
  const Tensor x = ids.narrow(1, 0, 6).contiguous(), y = ids.narrow(1, 1, 6).contiguous();
  return model.loss(model.forward(x), y).total;
}

bool is_expert(const std::string& name) {
  return name.find(".experts.") != std::string::npos;
}

apps::TrainOptions moe_train_options(const testing::TempDir& dir, const std::string& out) {
  apps::TrainOptions o;
  o.config = dir / "moe.json";
  std::ofstream(o.config) << kMoEConfig;
  for (auto [name, n, seed] : {std::tuple{"train.bin", 3000, 1}, std::tuple{"val.bin", 400, 2}}) {
    std::vector<uint32_t> tokens(n);
    const Tensor r = Tensor::rand({n}, seed, 0, DType::Float64, 0, 32);
    for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<uint32_t>(r.at({i}));
    data::write_shard(dir / name, tokens, 32);
  }
  o.data = dir / "train.bin";
  o.val_data = dir / "val.bin";
  o.out = dir / out;
  o.batch_size = 1;
  o.seq_len = 6;
  o.steps = 8;
  o.warmup = 2;
  o.lr = 2e-2;
  o.save_every = 4;
  o.log_every = 100;
  o.eval_batches = 1;
  return o;
}

}  // namespace

TEST_CASE("AdamW on a top-1 MoE with idle experts is torch.optim.AdamW on the same gradients",
          "[optim][moe]") {
  const nn::ModelConfig cfg = nn::ModelConfig::from_json(kMoEConfig);
  for (DType dt : {DType::Float64, DType::Float32}) {
    INFO(dtype_name(dt));
    nn::Transformer model(cfg, 11, dt);
    const auto named = model.named_parameters();
    optim::AdamW opt(optim::decay_groups(named, kWd), {kB1, kB2, kEps});
    std::vector<TorchAdamWParam> ref(named.size());
    for (size_t k = 0; k < named.size(); ++k) {
      ref[k].p = named[k].second.data().to_vector<double>();
      ref[k].m.assign(ref[k].p.size(), 0.0);
      ref[k].v.assign(ref[k].p.size(), 0.0);
      ref[k].weight_decay = named[k].second.dim() >= 2 ? kWd : 0.0;
    }
    std::vector<int> idle_then_used(named.size(), 0);  // 1: idle seen, 2: then used again
    for (int step = 0; step < 10; ++step) {
      const double lr = 2e-2 * (step % 3 + 1) / 3;
      model.zero_grad();
      total_loss(model, step).backward();
      for (size_t k = 0; k < named.size(); ++k) {
        const Variable& p = named[k].second;
        if (!p.grad().defined()) {
          CHECK(is_expert(named[k].first));  // only an expert can miss its gradient
          idle_then_used[k] = std::max(idle_then_used[k], 1);
          ref[k].update(nullptr, lr);
        } else {
          if (idle_then_used[k] == 1) idle_then_used[k] = 2;
          const std::vector<double> g = p.grad().to_vector<double>();
          ref[k].update(&g, lr);
        }
      }
      opt.step(lr);
    }
    // Some expert was idle in a step and updated after it: its step count
    // differs from the optimizer's, which is what this test is about.
    int64_t lagging = 0;
    for (size_t k = 0; k < named.size(); ++k) lagging += idle_then_used[k] == 2;
    REQUIRE(lagging > 0);

    double worst = 0, worst_expert = 0;
    std::string worst_name;
    for (size_t k = 0; k < named.size(); ++k) {
      const std::vector<double> got = named[k].second.data().to_vector<double>();
      double d = 0;
      for (size_t e = 0; e < got.size(); ++e) d = std::max(d, std::abs(got[e] - ref[k].p[e]));
      if (d > worst) worst = d, worst_name = named[k].first;
      if (idle_then_used[k] == 2) worst_expert = std::max(worst_expert, d);
      const std::map<std::string, int64_t> counts = opt.param_steps();
      CHECK(counts.at(named[k].first) == ref[k].step);
    }
    CAPTURE(worst_name, worst_expert);
    // float64: the same formula up to rounding; float32: ember's parameters
    // round to float32 each step while the reference stays in float64.
    CHECK(worst < (dt == DType::Float64 ? 1e-12 : 2e-6));
  }
}

TEST_CASE("per-parameter AdamW step counts round-trip through a checkpoint",
          "[optim][checkpoint]") {
  testing::TempDir dir("adamw_idle");
  const nn::ModelConfig cfg = nn::ModelConfig::from_json(kMoEConfig);
  nn::Transformer model(cfg, 5);
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), kWd), {kB1, kB2, kEps});
  for (int step = 0; step < 4; ++step) {
    model.zero_grad();
    total_loss(model, step).backward();
    opt.step(1e-2);
  }
  const std::map<std::string, int64_t> counts = opt.param_steps();
  std::string idle;  // an expert tensor updated fewer than 4 times
  for (const auto& [name, n] : counts) {
    if (n < 4 && idle.empty()) idle = name;
  }
  REQUIRE_FALSE(idle.empty());

  nn::Checkpoint c;
  c.config = cfg;
  c.model = model.state_dict();
  c.optim = opt.state_dict();
  c.optim_step = opt.steps();
  c.optim_param_steps = counts;
  const std::string path = dir / "ckpt.h5";
  nn::write_checkpoint(path, c);
  {
    H5File f(path, H5File::Mode::Read);
    CHECK(f.read_attr_int("/optim", "step") == 4);
    CHECK(f.read_attr_int("/optim/" + idle, "step") == counts.at(idle));
  }
  const nn::Checkpoint back = nn::read_checkpoint(path);
  CHECK(back.optim_param_steps == counts);
  nn::Transformer other(cfg, 5);
  optim::AdamW loaded(optim::decay_groups(other.named_parameters(), kWd));
  loaded.load_state_dict(back.optim, *back.optim_step, back.optim_param_steps);
  CHECK(loaded.param_steps() == counts);
  CHECK(loaded.steps() == 4);

  // A checkpoint from before per-parameter counts: every parameter took every step.
  c.optim_param_steps.clear();
  nn::write_checkpoint(path, c);
  const nn::Checkpoint old = nn::read_checkpoint(path);
  CHECK(old.optim_param_steps.empty());
  loaded.load_state_dict(old.optim, *old.optim_step, old.optim_param_steps);
  for (const auto& [name, n] : loaded.param_steps()) CHECK(n == 4);

  // A count beyond the optimizer's step, or for no parameter, is refused by name.
  std::map<std::string, int64_t> bad = counts;
  bad[idle] = 5;
  CHECK_THROWS_WITH(loaded.load_state_dict(c.optim, 4, bad),
                    Catch::Contains(idle) && Catch::Contains("step 5"));
  CHECK_THROWS_WITH(loaded.load_state_dict(c.optim, 4, {{"no.such.weight", 1}}),
                    Catch::Contains("no.such.weight"));
}

TEST_CASE("train --resume after a step with an idle expert is the unbroken run bit for bit",
          "[train][moe]") {
  for (int64_t zero : {0, 1}) {
    INFO("zero " << zero);
    testing::TempDir dir("adamw_idle_resume");
    apps::TrainOptions full = moe_train_options(dir, "full");
    full.zero = zero;
    REQUIRE(apps::run_train(full) == 0);
    const nn::Checkpoint at4 = nn::read_checkpoint(dir / ("full/" + apps::checkpoint_name(4)));
    const nn::Checkpoint at8 = nn::read_checkpoint(dir / ("full/" + apps::checkpoint_name(8)));
    // An expert idle before the checkpoint and updated after it: the resumed
    // run needs its own count to repeat the unbroken one.
    int64_t lagging = 0;
    for (const auto& [name, n] : at4.optim_param_steps) {
      lagging += n < 4 && at8.optim_param_steps.at(name) > n;
    }
    REQUIRE(lagging > 0);

    fs::create_directories(dir / "half");
    fs::copy_file(dir / ("full/" + apps::checkpoint_name(4)),
                  dir / ("half/" + apps::checkpoint_name(4)));
    apps::TrainOptions resume;
    resume.resume = dir / "half";
    resume.zero = zero;  // not part of the saved options: the state is the same either way
    resume.log_every = 100;
    REQUIRE(apps::run_train(resume) == 0);
    const nn::Checkpoint b = nn::read_checkpoint(dir / ("half/" + apps::checkpoint_name(8)));
    CHECK(b.optim_param_steps == at8.optim_param_steps);
    REQUIRE(b.model.size() == at8.model.size());
    for (const auto& [name, t] : at8.model) {
      INFO(name);
      CHECK(t.to_vector<float>() == b.model.at(name).to_vector<float>());
    }
    for (const auto& [name, t] : at8.optim) {
      INFO(name);
      CHECK(t.to_vector<float>() == b.optim.at(name).to_vector<float>());
    }
  }
}
