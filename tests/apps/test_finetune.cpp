// `ember finetune` through the library (apps::run_finetune) on a tiny base: the loss of a step
// (docs/model.md#loss-of-a-step) against an independent per-conversation sum, the same loss and
// gradient norm for (B 4, accum 1) and (B 2, accum 2) with rows padded differently, MoE losses
// over the real tokens only, held-out validation, bit-exact resume, and the option table.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/common/model_io.h"
#include "apps/train/options.h"
#include "apps/train/run_files.h"
#include "apps/train/trainer.h"
#include "autograd/grad_mode.h"
#include "core/io/sha256.h"
#include "data/chat.h"
#include "finetune_testing.h"
#include "nn/adapters/adapters.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::apps;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using testing::TempDir;

TrainOptions chat_options(const TempDir& dir, const std::string& out) {
  if (!fs::exists(dir / "base.h5")) testing::write_chat_base(dir / "base.h5");
  if (!fs::exists(dir / "chat.jsonl")) testing::write_chat_data(dir / "chat.jsonl");
  TrainOptions o;
  o.finetune = true;
  o.full = true;
  o.base = dir / "base.h5";
  o.data = dir / "chat.jsonl";
  o.out = dir / out;
  o.batch_size = 4;
  o.seq_len = 32;
  o.steps = 6;
  o.warmup = 2;
  o.lr = 1e-2;
  o.log_every = 100;
  o.val_fraction = 0;
  return o;
}

// The per-step records of OUT/metrics.jsonl (those with a training loss).
std::vector<json> step_records(const std::string& out) {
  std::ifstream f(fs::path(out) / "metrics.jsonl");
  std::vector<json> records;
  for (std::string line; std::getline(f, line);) {
    const json j = json::parse(line);
    if (j.contains("loss")) records.push_back(j);
  }
  return records;
}

std::map<std::string, Tensor> model_at(const std::string& out, int64_t step) {
  return nn::read_checkpoint((fs::path(out) / checkpoint_name(step)).string(), false).model;
}

// Two steps of the sequential chat data as (B 4, accum 1) into dir/b4 and as (B 2, accum 2)
// into dir/b2a2: the same rows, padded differently per micro-batch. Their step records.
std::pair<std::vector<json>, std::vector<json>> run_b4_and_b2a2(const TempDir& dir) {
  TrainOptions b4 = chat_options(dir, "b4");
  b4.sequential = true;
  b4.steps = 2;
  TrainOptions b2a2 = b4;
  b2a2.out = dir / "b2a2";
  b2a2.batch_size = 2;
  b2a2.grad_accum = 2;
  REQUIRE(run_finetune(b4) == 0);
  REQUIRE(run_finetune(b2a2) == 0);
  std::pair<std::vector<json>, std::vector<json>> records{step_records(b4.out),
                                                          step_records(b2a2.out)};
  REQUIRE(records.first.size() == 2);
  REQUIRE(records.second.size() == 2);
  return records;
}

// dir/run's step-3 checkpoint copied to dir/run_half and resumed there: its step 6 equals
// run's, tensor by tensor, bit for bit.
void check_resumes_bit_for_bit(const TempDir& dir, const std::string& run) {
  const std::string half = dir / (run + "_half");
  fs::create_directories(half);
  fs::copy_file(dir / (run + "/step_00000003.h5"), fs::path(half) / "step_00000003.h5");
  TrainOptions resume;
  resume.finetune = true;
  resume.resume = half;
  resume.log_every = 100;
  REQUIRE(run_finetune(resume) == 0);
  const auto a = model_at(dir / run, 6), b = model_at(half, 6);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK(t.to_vector<float>() == b.at(name).to_vector<float>());
  }
}

// docs/model.md#loss-of-a-step by hand: each conversation alone (no padding, no batch), float64
// log-softmax; the sum of CE over the trained targets and their count.
std::pair<double, int64_t> summed_ce(const nn::Transformer& model, const data::ChatLine& line,
                                     int64_t T) {
  data::ChatTokens row = data::render_chat(testing::chat_tokenizer(), line);
  const size_t len = std::min(row.ids.size(), static_cast<size_t>(T + 1));
  std::vector<int64_t> ids(row.ids.begin(), row.ids.begin() + static_cast<std::ptrdiff_t>(len) - 1);
  const int64_t n = static_cast<int64_t>(ids.size());
  NoGradGuard no_grad;
  const Tensor logits =
      model.forward(Tensor::from_vector(ids, {1, n})).logits.data().to(DType::Float64);
  const int64_t V = logits.size(2);
  const double* l = logits.contiguous().data<double>();
  double sum = 0;
  int64_t count = 0;
  for (int64_t t = 0; t < n; ++t) {
    if (!row.trained[static_cast<size_t>(t + 1)]) continue;
    double mx = -HUGE_VAL, se = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, l[t * V + v]);
    for (int64_t v = 0; v < V; ++v) se += std::exp(l[t * V + v] - mx);
    sum += mx + std::log(se) - l[t * V + row.ids[static_cast<size_t>(t + 1)]];
    ++count;
  }
  return {sum, count};
}

}  // namespace

TEST_CASE(
    "a fine-tuning step's loss is the CE over its trained tokens / their count, however batched",
    "[finetune]") {
  TempDir dir("finetune");
  const auto [r4, r22] = run_b4_and_b2a2(dir);

  // Step 0 reads conversations 0-3 (sequential): their trained tokens, each row alone.
  const nn::Checkpoint base = nn::read_checkpoint(dir / "base.h5", false);
  nn::Transformer model(base.config);
  model.load_state_dict(base.model);
  const std::vector<data::ChatLine> lines = data::read_chat_file(dir / "chat.jsonl");
  double sum = 0;
  int64_t count = 0;
  std::set<int64_t> counts;
  for (size_t i = 0; i < 4; ++i) {
    const auto [s, c] = summed_ce(model, lines[i], 32);
    sum += s;
    count += c;
    counts.insert(c);
  }
  REQUIRE(counts.size() >
          2);  // micro-batches of different trained counts: a per-micro-batch mean would differ
  CHECK(r4[0].at("trained_tokens").get<int64_t>() == count);
  CHECK(r4[0].at("loss").get<double>() == Approx(sum / static_cast<double>(count)).epsilon(1e-5));
  for (size_t s = 0; s < 2; ++s) {
    INFO("step " << s + 1);
    CHECK(r22[s].at("trained_tokens") == r4[s].at("trained_tokens"));
    CHECK(r22[s].at("loss").get<double>() == Approx(r4[s].at("loss").get<double>()).epsilon(1e-6));
    CHECK(r22[s].at("grad_norm").get<double>() ==
          Approx(r4[s].at("grad_norm").get<double>()).epsilon(1e-5));
  }
  const auto w4 = model_at(dir / "b4", 2), w22 = model_at(dir / "b2a2", 2);
  for (const auto& [name, t] : w4) {
    INFO(name);
    const std::vector<float> a = t.to_vector<float>(), b = w22.at(name).to_vector<float>();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i)
      diff += std::pow(a[i] - b[i], 2), norm += std::pow(a[i], 2);
    CHECK(std::sqrt(diff) <= 1e-5 * std::sqrt(norm));
  }
}

TEST_CASE("MoE losses of padded rows are those of the real tokens alone", "[finetune]") {
  const nn::ModelConfig cfg = testing::chat_base_config(true);
  nn::Transformer model(cfg, 5);
  NoGradGuard no_grad;
  const std::vector<int64_t> ids{5, 70, 71, 80, 9, 100, 101, 33};
  const Tensor alone = Tensor::from_vector(ids, {1, 8});
  std::vector<int64_t> padded_ids = ids;
  padded_ids.resize(14, 0);
  std::vector<float> real(14, 0.0f);
  std::fill(real.begin(), real.begin() + 8, 1.0f);
  const nn::ModelOutput a = model.forward(alone);
  const nn::ModelOutput p =
      model.forward(Tensor::from_vector(padded_ids, {1, 14}), Tensor::from_vector(real, {1, 14}));
  const nn::ModelOutput unmasked = model.forward(Tensor::from_vector(padded_ids, {1, 14}));
  REQUIRE(a.moe_aux.size() == 2);
  for (size_t layer = 0; layer < 2; ++layer) {
    INFO("layer " << layer);
    CHECK(p.moe_aux[layer].aux.item() == Approx(a.moe_aux[layer].aux.item()).epsilon(1e-5));
    CHECK(p.moe_aux[layer].router_z.item() ==
          Approx(a.moe_aux[layer].router_z.item()).epsilon(1e-5));
    CHECK(unmasked.moe_aux[layer].router_z.item() !=
          Approx(a.moe_aux[layer].router_z.item()).epsilon(1e-5));
  }
  // A mask of no real token: both terms 0.
  const nn::ModelOutput none = model.forward(alone, Tensor::zeros({1, 8}, DType::Float32));
  CHECK(none.moe_aux[0].aux.item() == 0);
  CHECK(none.moe_aux[0].router_z.item() == 0);
}

TEST_CASE("a MoE base fine-tunes the same with accumulation", "[finetune]") {
  TempDir dir("finetune");
  testing::write_chat_base(dir / "base.h5", true);
  const auto [r4, r22] = run_b4_and_b2a2(dir);
  CHECK(r4[0].at("aux").get<double>() > 0.5);
  CHECK(r22[0].at("loss").get<double>() == Approx(r4[0].at("loss").get<double>()).epsilon(1e-6));
  // The MoE terms are means over micro-batches: not equal, but near.
  CHECK(r22[0].at("aux").get<double>() == Approx(r4[0].at("aux").get<double>()).epsilon(0.2));
}

TEST_CASE("held-out conversations are validated, and a fine-tuning run resumes bit for bit",
          "[finetune]") {
  TempDir dir("finetune");
  TrainOptions full = chat_options(dir, "full");
  full.val_fraction = 0.25;
  full.save_every = 3;
  full.eval_every = 2;
  full.batch_size = 2;
  full.grad_accum = 2;
  REQUIRE(run_finetune(full) == 0);
  std::ifstream f(dir / "full/metrics.jsonl");
  std::vector<json> evals;
  for (std::string line; std::getline(f, line);) {
    const json j = json::parse(line);
    if (j.contains("val_loss")) evals.push_back(j);
  }
  // The base's held-out loss at step 0, then steps 2, 4, 6; the loss falls.
  REQUIRE(evals.size() == 4);
  CHECK(evals[0].at("step") == 0);
  CHECK(evals[3].at("step") == 6);
  CHECK(evals[3].at("val_loss").get<double>() < evals[0].at("val_loss").get<double>());

  check_resumes_bit_for_bit(dir, "full");
  // A train run does not resume a fine-tuning run, nor the other way round.
  TrainOptions as_train;
  as_train.resume = dir / "full_half";
  CHECK_THROWS_WITH(run_train(as_train), Catch::Contains("ember finetune --resume"));
}

TEST_CASE("ember finetune's option table: its own fields and train's that apply",
          "[finetune][options]") {
  TrainOptions o;
  o.finetune = true;
  std::set<std::string> flags;
  for (const OptionFlag& f : option_flags(o)) CHECK(flags.insert(f.flag).second);
  for (const char* f :
       {"--base",         "--data",         "--out",          "--full",         "--lora-r",
        "--lora-alpha",   "--lora-dropout", "--lora-targets", "--quantize",     "--add-chat-tokens",
        "--val-fraction", "--steps",        "--batch-size",   "--seq-len",      "--grad-accum",
        "--lr",           "--min-lr",       "--warmup",       "--weight-decay", "--clip",
        "--seed",         "--sequential",   "--save-every",   "--keep",         "--eval-every",
        "--dtype",        "--resume",       "--pp",           "--micro-batches", "--pp-layers",
        "--pp-schedule"}) {
    CHECK(flags.count(f) == 1);
  }
  for (const char* f : {"--config", "--preset", "--init-from", "--tokenizer", "--val-data",
                        "--vocab-size", "--eval-batches", "--sample-tokens"}) {
    CHECK(flags.count(f) == 0);
  }
  // The mode is the run's: a resumed run refuses another.
  o.full = true;
  const json saved = options_to_json(o);
  CHECK(saved.at("full") == true);
  CHECK_FALSE(saved.contains("base"));
  TrainOptions r;
  r.finetune = true;
  r.lora_r = 4;
  r.given = {"lora_r"};
  CHECK_THROWS_WITH(restore_options(saved, r),
                    Catch::Contains("--lora-r 4 differs from the run's 8"));
}

TEST_CASE("a LoRA run trains the adapters alone, names its base, and resumes bit for bit",
          "[finetune][lora]") {
  TempDir dir("finetune");
  TrainOptions lora = chat_options(dir, "lora");
  lora.full = false;
  lora.lora_targets = "q,v,down";
  lora.save_every = 3;
  const std::string base_bytes = testing::read_text(dir / "base.h5");
  REQUIRE(run_finetune(lora) == 0);
  CHECK(testing::read_text(dir / "base.h5") == base_bytes);  // the base file is never written

  const std::string ckpt = (fs::path(lora.out) / checkpoint_name(6)).string();
  const nn::Checkpoint c = nn::read_checkpoint(ckpt, true);
  REQUIRE(c.config.lora);
  CHECK(c.config.lora->targets == std::vector<std::string>{"q", "v", "down"});
  CHECK(c.base == fs::absolute(dir / "base.h5").lexically_normal().string());
  CHECK(c.base_sha256 == sha256_file(dir / "base.h5"));
  CHECK(c.model.size() == 12);  // 2 layers x 3 targets x (A, B)
  for (const auto& [name, t] : c.model) {
    INFO(name);
    CHECK(name.find(".lora_") != std::string::npos);
    CHECK(c.optim.count(name + "/exp_avg") == 1);
  }
  // The model it loads: the base's tensors bit for bit, adapters trained (B no longer 0).
  const nn::Checkpoint base = nn::read_checkpoint(dir / "base.h5", false);
  const LoadedModel loaded = load_model(ckpt);
  int64_t frozen = 0;
  for (const auto& [name, v] : loaded.model->named_parameters()) {
    const auto it = base.model.find(name);
    if (it == base.model.end()) continue;
    INFO(name);
    CHECK(v.data().to_vector<float>() == it->second.to_vector<float>());
    ++frozen;
  }
  CHECK(frozen == static_cast<int64_t>(base.model.size()));
  const std::vector<float> b =
      c.model.at("model.layers.1.mlp.down_proj.lora_B.weight").to_vector<float>();
  CHECK(std::any_of(b.begin(), b.end(), [](float v) { return v != 0; }));

  check_resumes_bit_for_bit(dir, "lora");
}

TEST_CASE("QLoRA on every target with --add-chat-tokens: new rows trained, base kept in NF4",
          "[finetune][lora]") {
  TempDir dir("finetune");
  testing::write_base_without_chat_tokens(dir / "base.h5");
  TrainOptions o = chat_options(dir, "qlora");
  o.full = false;
  o.quantize = "nf4-dq";
  o.lora_targets = "q,k,v,o,gate,up,down,head";
  o.add_chat_tokens = true;
  o.steps = 3;
  REQUIRE(run_finetune(o) == 0);
  const std::string ckpt = (fs::path(o.out) / checkpoint_name(3)).string();
  const nn::Checkpoint c = nn::read_checkpoint(ckpt, false);
  CHECK(c.config.vocab_size == 259);
  CHECK(c.config.quantize == "nf4-dq");
  CHECK(c.model.at("model.embed_tokens.added_rows").shape() == Shape{2, 16});
  const LoadedModel loaded = load_model(ckpt);
  CHECK(loaded.tokenizer.find_special("<|im_end|>") == std::optional<uint32_t>(258));
  // --full grows the plain model: every row trained, a plain checkpoint.
  TrainOptions full = chat_options(dir, "full");
  full.add_chat_tokens = true;
  full.steps = 2;
  REQUIRE(run_finetune(full) == 0);
  const nn::Checkpoint f = nn::read_checkpoint(dir / "full/step_00000002.h5", false);
  CHECK_FALSE(f.config.lora);
  CHECK(f.config.vocab_size == 259);
  CHECK(f.model.at("model.embed_tokens.weight").shape() == Shape{259, 16});
  CHECK(load_model(dir / "full/step_00000002.h5").tokenizer.find_special("<|im_start|>") ==
        std::optional<uint32_t>(257));
  // Without --add-chat-tokens the same base is one line saying how to add them.
  TrainOptions plain = chat_options(dir, "plain");
  plain.full = false;
  CHECK_THROWS_WITH(run_finetune(plain),
                    Catch::Contains("base.h5: the tokenizer has no <|im_start|>") &&
                        Catch::Contains("--add-chat-tokens"));
  CHECK_FALSE(fs::exists(dir / "plain"));
}
