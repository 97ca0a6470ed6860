// Pipeline parallelism (dist/pipeline_runner.h over Transformer stages, nn/pipeline_stage.h) at
// P = the world size: every stage built from the one-process model's seed, run by 1f1b and
// gpipe over M = 2 and 4 micro-batches; the stages' losses sum to the one-process mean over the
// M micro-batches (as --grad-accum M) and each stage's gradients are the one-process model's
// (float64), for a tied, an untied and an MoE config; 1f1b holds min(P - s, M) micro-batches.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "autograd/ops.h"
#include "dist/group.h"
#include "dist/pipeline_runner.h"
#include "mpi_testing.h"
#include "nn/parallel_plan.h"
#include "nn/tensor_parallel.h"

using namespace ember;
using ember::testing::comm;

namespace {

constexpr uint64_t kSeed = 5;
constexpr int64_t kRows = 2, kLen = 6;  // one micro-batch: [kRows, kLen]

// Tied, rope, GQA, QK-norm, z-loss, 5 blocks (uneven stages).
const char* kTied = R"({"vocab_size": 37, "d_model": 16, "n_layers": 5, "n_heads": 4,
    "n_kv_heads": 2, "ffn_hidden": 24, "qk_norm": true, "max_seq_len": 16, "z_loss_coef": 1e-3,
    "tie_embeddings": true})";
// GPT-2 style: learned positions, biases, LayerNorm, gelu, an untied head, a final soft-cap.
const char* kUntied = R"({"vocab_size": 41, "d_model": 16, "n_layers": 4, "n_heads": 2,
    "ffn_hidden": 32, "pos": "learned", "bias": true, "norm": "layernorm", "ffn_act": "gelu",
    "max_seq_len": 16, "tie_embeddings": false, "final_softcap": 20})";
// MoE on blocks 1 and 3 with both MoE losses, tied.
const char* kMoE = R"({"vocab_size": 37, "d_model": 16, "n_layers": 4, "n_heads": 4,
    "ffn_hidden": 24, "max_seq_len": 16, "z_loss_coef": 1e-3, "tie_embeddings": true,
    "moe": {"n_experts": 4, "top_k": 2, "every": 2, "expert_hidden": 12, "aux_loss_coef": 0.05,
            "router_z_loss_coef": 0.01}})";

// Micro-batch m's ids [kRows, kLen + 1] of a vocabulary of V: inputs, then targets one later.
Tensor batch(int m, int64_t V) {
  return Tensor::rand({kRows, kLen + 1}, 17, static_cast<uint64_t>(m) * 1000, DType::Float64, 0,
                      static_cast<double>(V))
      .to(DType::Int64);
}
Tensor inputs(int m, int64_t V) { return batch(m, V).narrow(1, 0, kLen).contiguous(); }
Tensor targets(int m, int64_t V) { return batch(m, V).narrow(1, 1, kLen).contiguous(); }

// What a model (or a stage) computed over M micro-batches: the loss (its total) and the aux and
// router z figures summed over the micro-batches / M, and each parameter's gradient.
struct Result {
  double loss = 0, aux = 0, router_z = 0;
  std::map<std::string, std::vector<double>> data, grad;
  std::map<std::string, Shape> shape;
};

void keep_gradients(const nn::Module& model, Result& r) {
  for (const auto& [name, p] : model.named_parameters()) {
    r.shape[name] = p.shape();
    r.data[name] = p.data().to_vector<double>();
    r.grad[name] = p.grad().defined() ? p.grad().to_vector<double>() : std::vector<double>{};
  }
}

// One process: loss.total / M back-propagated per micro-batch (the trainer's --grad-accum M).
Result one_process(const nn::ModelConfig& cfg, int M) {
  nn::Transformer model(cfg, kSeed, DType::Float64);
  Result r;
  for (int m = 0; m < M; ++m) {
    const nn::LossTerms l = model.loss(model.forward(inputs(m, cfg.vocab_size)), targets(m, cfg.vocab_size));
    (l.total / static_cast<double>(M)).backward();
    r.loss += l.total.item() / M;
    r.aux += l.aux / M;
    r.router_z += l.router_z / M;
  }
  keep_gradients(model, r);
  return r;
}

// One stage's model driven by the runner: the graphs of the micro-batches in flight.
class Stage {
 public:
  Stage(const nn::ModelConfig& cfg, nn::TensorParallel tp, const nn::PipelineStage& stage, int M)
      : model_(cfg, kSeed, DType::Float64, tp, stage), M_(M) {}

  dist::StageFunctions functions() {
    return {[this](int m, const Tensor& in) { return forward(m, in); },
            [this](int m, const Tensor& grad) { return backward(m, grad); }};
  }
  const nn::Transformer& model() const { return model_; }
  Result result;
  size_t peak_live = 0;  // most micro-batches whose graphs were held at once

 private:
  struct Live {
    Variable input;
    nn::StageOutput out;
    nn::LossTerms loss;
  };
  Tensor forward(int m, const Tensor& in) {
    Live l;
    if (!model_.stage().first()) l.input = Variable(in).set_requires_grad(true);
    const int64_t V = model_.config().vocab_size;
    l.out = model_.forward_stage(inputs(m, V), l.input);
    l.loss = model_.stage_loss(l.out, targets(m, V));
    if (l.loss.total.defined()) result.loss += l.loss.total.item() / M_;
    result.aux += l.loss.aux / M_;
    result.router_z += l.loss.router_z / M_;
    const Tensor out = model_.stage().last() ? Tensor() : l.out.output.data();
    live_[m] = std::move(l);
    peak_live = std::max(peak_live, live_.size());
    return out;
  }
  Tensor backward(int m, const Tensor& grad) {
    Live& l = live_.at(m);
    std::vector<Variable> roots;
    std::vector<Tensor> seeds;
    if (!model_.stage().last()) {
      roots.push_back(l.out.output);
      seeds.push_back(grad);
    }
    if (l.loss.total.defined()) {
      roots.push_back(l.loss.total / static_cast<double>(M_));
      seeds.emplace_back();
    }
    ember::backward(roots, seeds);  // one pass from the output and the loss
    const Tensor grad_in = model_.stage().first() ? Tensor() : l.input.grad();
    live_.erase(m);
    return grad_in;
  }

  nn::Transformer model_;
  int M_;
  std::map<int, Live> live_;
};

double worst_difference(const std::vector<double>& have, const std::vector<double>& want) {
  double worst = have.size() == want.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(have.size(), want.size()); ++i) {
    worst = std::max(worst, std::abs(have[i] - want[i]));
  }
  return worst;
}

// The stage holds the parameters the plan gives it, with the one-process weights and gradients
// (their tensor rank's shards at T > 1).
void check_parameters(const nn::ModelConfig& cfg, const nn::ParallelLayout& plan, int s,
                      const nn::TensorParallel& tp, Result& got, const Result& whole) {
  std::set<std::string> expected;
  for (const nn::PlacedParameter& p : nn::place_parameters(cfg, plan)) {
    if (std::count(p.stages.begin(), p.stages.end(), s)) expected.insert(p.name);
  }
  std::set<std::string> held;
  for (const auto& [name, g] : got.grad) held.insert(name);
  CHECK(held == expected);
  const auto shard = [&](const std::string& name, const std::vector<double>& v) {
    const Tensor t = Tensor::from_vector(v, whole.shape.at(name));
    return nn::tensor_shard(t, nn::tensor_split(name), tp.rank(), tp.size()).to_vector<double>();
  };
  for (const auto& [name, g] : got.grad) {
    INFO(name);
    REQUIRE(whole.grad.count(name));
    CHECK(got.data.at(name) == shard(name, whole.data.at(name)));
    CHECK(worst_difference(g, shard(name, whole.grad.at(name))) <= 1e-12);
  }
}

// The world as (T, P = world / T, 1): stage s of the plan on each rank, run by the runner.
void check_pipeline_equals_one_process(const char* json, dist::ScheduleKind kind, int M, int T = 1) {
  const nn::ModelConfig cfg = nn::ModelConfig::from_json(json);
  const int P = comm().world_size() / T;
  dist::LayoutGroups groups = dist::make_layout_groups(comm(), dist::ParallelLayout(P * T, T, P));
  const int s = groups.pipeline.rank();
  const nn::ParallelLayout plan = nn::make_parallel_layout(cfg, T, P);
  const nn::TensorParallel tp{T > 1 ? &groups.tensor : nullptr};
  Stage stage(cfg, tp, nn::pipeline_stage(plan, s), M);
  dist::PipelineRunner runner(groups.pipeline, kind, M, {kRows, kLen, cfg.d_model}, DType::Float64);
  const dist::PipelineTimes times = runner.run(stage.functions());
  if (cfg.tie_embeddings && (s == 0 || s == P - 1)) {
    dist::sum_tied_gradient(groups.pipeline, stage.model().embed_tokens().weight().grad());
  }
  INFO(json << "\n" << dist::schedule_name(kind) << " T " << T << " P " << P << " M " << M
            << " stage " << s);
  // The in-flight bound, counted by the runner and by the stage's live graphs.
  const int bound = kind == dist::ScheduleKind::OneFOneB ? std::min(P - s, M) : M;
  CHECK(times.peak_in_flight == bound);
  CHECK(stage.peak_live == static_cast<size_t>(bound));
  CHECK(times.forward > 0);
  CHECK(times.backward > 0);
  CHECK(times.wait >= 0);
  // The stages' losses sum to the one-process loss.
  const Result whole = one_process(cfg, M);
  Tensor sums = Tensor::from_vector(
      std::vector<double>{stage.result.loss, stage.result.aux, stage.result.router_z});
  groups.pipeline.all_reduce_sum(sums);
  const std::vector<double> sum = sums.to_vector<double>();
  CHECK(sum[0] == Approx(whole.loss).epsilon(1e-12));
  CHECK(sum[1] == Approx(whole.aux).epsilon(1e-12).margin(1e-15));
  CHECK(sum[2] == Approx(whole.router_z).epsilon(1e-12).margin(1e-15));
  keep_gradients(stage.model(), stage.result);
  check_parameters(cfg, plan, s, tp, stage.result, whole);
}

}  // namespace

TEST_CASE("pipeline stages equal one process: tied embeddings", "[mpi][pipeline]") {
  for (dist::ScheduleKind kind : {dist::ScheduleKind::OneFOneB, dist::ScheduleKind::GPipe}) {
    for (int M : {2, 4}) check_pipeline_equals_one_process(kTied, kind, M);
  }
}

TEST_CASE("pipeline stages equal one process: untied head, learned positions", "[mpi][pipeline]") {
  for (dist::ScheduleKind kind : {dist::ScheduleKind::OneFOneB, dist::ScheduleKind::GPipe}) {
    for (int M : {2, 4}) check_pipeline_equals_one_process(kUntied, kind, M);
  }
}

TEST_CASE("pipeline stages equal one process: MoE aux and router z losses", "[mpi][pipeline]") {
  for (dist::ScheduleKind kind : {dist::ScheduleKind::OneFOneB, dist::ScheduleKind::GPipe}) {
    for (int M : {2, 4}) check_pipeline_equals_one_process(kMoE, kind, M);
  }
}

// Stage s adds 1 to every activation and 1 to every gradient: stage s's forward of micro-batch
// m reads m + s, the last stage's backward starts from 100 m, and stage s's reads
// 100 m + P - 2 - s. 1 MiB messages go by rendezvous: with blocking sends, 1F1B's neighbours
// would each wait in a send for the other (stage 0 sending F1's output while stage 1 sends B0's
// gradient) and never return.
TEST_CASE("a pipeline of tensor-parallel stages equals one process: (2, 2, 1)", "[mpi][pipeline]") {
  if (comm().world_size() != 4) return;  // the layout needs 4 ranks
  for (dist::ScheduleKind kind : {dist::ScheduleKind::OneFOneB, dist::ScheduleKind::GPipe}) {
    check_pipeline_equals_one_process(kTied, kind, 4, 2);
    check_pipeline_equals_one_process(kUntied, kind, 2, 2);
    check_pipeline_equals_one_process(kMoE, kind, 2, 2);
  }
}

TEST_CASE("large activations and gradients reach the right micro-batch without deadlock",
          "[mpi][pipeline]") {
  const int P = comm().world_size();
  dist::LayoutGroups groups = dist::make_layout_groups(comm(), dist::ParallelLayout(P, 1, P));
  const int s = groups.pipeline.rank();
  const Shape shape{2, 64, 1024};
  const auto all_equal = [](const Tensor& t, double value) {
    const std::vector<double> v = t.to_vector<double>();
    return std::all_of(v.begin(), v.end(), [value](double x) { return x == value; });
  };
  for (dist::ScheduleKind kind : {dist::ScheduleKind::OneFOneB, dist::ScheduleKind::GPipe}) {
    const int M = 4;
    INFO(dist::schedule_name(kind) << " stage " << s);
    int bad = 0;
    const dist::StageFunctions f{
        [&](int m, const Tensor& in) {
          const Tensor x = s == 0 ? Tensor::full(shape, m, DType::Float64) : in;
          bad += !all_equal(x, m + s);
          return Tensor::full(shape, m + s + 1, DType::Float64);
        },
        [&](int m, const Tensor& grad) {
          if (s == P - 1) return Tensor::full(shape, 100.0 * m, DType::Float64);
          bad += !all_equal(grad, 100.0 * m + P - 2 - s);
          return Tensor::full(shape, 100.0 * m + P - 1 - s, DType::Float64);
        }};
    dist::PipelineRunner runner(groups.pipeline, kind, M, shape, DType::Float64);
    const dist::PipelineTimes times = runner.run(f);
    CHECK(bad == 0);
    CHECK(times.peak_in_flight == (kind == dist::ScheduleKind::OneFOneB ? std::min(P - s, M) : M));
  }
}
