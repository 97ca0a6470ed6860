// Transformer pipeline stages (nn/pipeline_stage.h) in one process, without dist: each stage of
// P = 3 holds what nn/parallel_plan places on it with the one-process weights; the stages run
// as a chain (hidden states handed on, their gradients handed back, the tied table's two
// gradients added) give the one-process loss and gradients (float64, MoE losses included); and
// what a stage refuses.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "autograd/ops.h"
#include "core/kernels/elementwise.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;

namespace {

// Tied, MoE on blocks 1 and 3 of 5 (stages of 2, 2, 1 blocks: the last has no MoE layer).
const char* kConfig = R"({"vocab_size": 29, "d_model": 16, "n_layers": 5, "n_heads": 4,
    "n_kv_heads": 2, "ffn_hidden": 24, "max_seq_len": 16, "z_loss_coef": 1e-3,
    "tie_embeddings": true, "moe": {"n_experts": 4, "top_k": 2, "every": 2, "expert_hidden": 12,
    "aux_loss_coef": 0.05, "router_z_loss_coef": 0.01}})";

Tensor random_ids(int64_t V, uint64_t seed) {
  return Tensor::rand({2, 6}, seed, 0, DType::Float64, 0, static_cast<double>(V)).to(DType::Int64);
}

std::map<std::string, Variable> by_name(const Module& m) {
  std::map<std::string, Variable> out;
  for (const auto& [name, p] : m.named_parameters()) out.emplace(name, p);
  return out;
}

double worst_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

// The loss of a whole model or a stage: plain, or the trainer's weighted form (a trained mask
// over a norm, the MoE terms scaled by 0.5 and taken over the real tokens).
struct LossInputs {
  Tensor ids, targets, weight, real;
  bool weighted = false;
};
LossTerms whole_loss(const Transformer& m, const LossInputs& in) {
  if (!in.weighted) return m.loss(m.forward(in.ids), in.targets);
  return m.loss(m.forward(in.ids, in.real), in.targets, in.weight, 7.0, 0.5);
}
LossTerms stage_loss(const Transformer& m, const StageOutput& out, const LossInputs& in) {
  if (!in.weighted) return m.stage_loss(out, in.targets);
  return m.stage_loss(out, in.targets, in.weight, 7.0, 0.5);
}

// Each stage forward from a leaf holding the previous stage's output; backward last stage
// first, one pass from its output (seeded with the next stage's input gradient) and its loss.
void check_chain(bool weighted) {
  const ModelConfig cfg = ModelConfig::from_json(kConfig);
  const ParallelLayout plan = make_parallel_layout(cfg, 1, 3);
  LossInputs in{random_ids(cfg.vocab_size, 7), random_ids(cfg.vocab_size, 8), Tensor(), Tensor(),
                weighted};
  in.weight = Tensor::from_vector(std::vector<double>{1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1}, {2, 6});
  in.real = weighted ? in.weight.to(DType::Float32) : Tensor();
  INFO((weighted ? "weighted" : "plain"));
  Transformer whole(cfg, 4, DType::Float64);
  const LossTerms want = whole_loss(whole, in);
  want.total.backward();
  std::vector<std::unique_ptr<Transformer>> stages;
  std::vector<Variable> inputs, outputs, losses;
  double total = 0, aux = 0, router_z = 0;
  for (int64_t s = 0; s < 3; ++s) {
    stages.push_back(std::make_unique<Transformer>(cfg, 4, DType::Float64, TensorParallel{},
                                                   pipeline_stage(plan, s)));
    inputs.push_back(s == 0 ? Variable() : Variable(outputs.back().data()).set_requires_grad(true));
    const StageOutput out = stages.back()->forward_stage(in.ids, inputs.back(), in.real);
    const LossTerms l = stage_loss(*stages.back(), out, in);
    REQUIRE(l.total.defined());  // stages 0 and 1: an MoE layer each; stage 2: the loss head
    outputs.push_back(out.output);
    losses.push_back(l.total);
    total += l.total.item();
    aux += l.aux;
    router_z += l.router_z;
  }
  CHECK(aux > 0.5);  // aux is about 1 at balance
  CHECK(total == Approx(want.total.item()).epsilon(1e-12));
  CHECK(aux == Approx(want.aux).epsilon(1e-12));
  CHECK(router_z == Approx(want.router_z).epsilon(1e-12));
  Tensor grad;  // the gradient of stage s's output: the next stage's input gradient
  for (int64_t s = 2; s >= 0; --s) {
    const size_t i = static_cast<size_t>(s);
    if (s == 2) backward({losses[i]}, {Tensor()});
    else backward({outputs[i], losses[i]}, {grad, Tensor()});
    if (s > 0) grad = inputs[i].grad();
  }
  const auto want_grads = by_name(whole);
  const Tensor tied = kernels::add(stages[0]->embed_tokens().weight().grad(),
                                   stages[2]->embed_tokens().weight().grad());
  for (const auto& stage : stages) {
    for (const auto& [name, p] : stage->named_parameters()) {
      INFO(name);
      const Tensor g = name == "model.embed_tokens.weight" ? tied : p.grad();
      CHECK(worst_difference(g, want_grads.at(name).grad()) <= 1e-12);
    }
  }
}

}  // namespace

TEST_CASE("pipeline stages hold their plan's parameters with the one-process weights",
          "[pipeline]") {
  const ModelConfig cfg = ModelConfig::from_json(kConfig);
  const ParallelLayout plan = make_parallel_layout(cfg, 1, 3);
  CHECK(plan.stage_layers == std::vector<int64_t>{2, 2, 1});
  const auto whole = by_name(Transformer(cfg, 4, DType::Float64));
  for (int64_t s = 0; s < 3; ++s) {
    INFO("stage " << s);
    const Transformer stage(cfg, 4, DType::Float64, {}, pipeline_stage(plan, s));
    CHECK(stage.blocks().size() == static_cast<size_t>(plan.stage_layers[static_cast<size_t>(s)]));
    std::set<std::string> want, held;
    for (const PlacedParameter& p : place_parameters(cfg, plan)) {
      if (std::count(p.stages.begin(), p.stages.end(), s)) want.insert(p.name);
    }
    for (const auto& [name, p] : stage.named_parameters()) {
      held.insert(name);
      CHECK(p.data().to_vector<double>() == whole.at(name).data().to_vector<double>());
    }
    CHECK(held == want);
  }
}

TEST_CASE("pipeline stages run as a chain give the one-process loss and gradients", "[pipeline]") {
  check_chain(false);
  check_chain(true);
}

TEST_CASE("what a pipeline stage refuses", "[pipeline]") {
  const ModelConfig cfg = ModelConfig::from_json(kConfig);
  const ParallelLayout plan = make_parallel_layout(cfg, 1, 3);
  CHECK_THROWS_WITH(pipeline_stage(plan, 3), "pipeline stage 3 is outside [0, 3)");
  CHECK_THROWS_WITH(Transformer(cfg, 4, DType::Float64, {}, PipelineStage{2, 3, 3, 1}),
                    "the last pipeline stage must end at block 5, not 4");
  CHECK_THROWS_WITH(Transformer(cfg, 4, DType::Float64, {}, PipelineStage{0, 2, 1, 2}),
                    "pipeline stage 0 must start at block 0, not 1");
  CHECK_THROWS_WITH(Transformer(cfg, 4, DType::Float64, {}, PipelineStage{1, 2, 3, 4}),
                    "pipeline stage 1: blocks [3, 7) are not blocks of a model of n_layers 5");
  const Transformer middle(cfg, 4, DType::Float64, {}, pipeline_stage(plan, 1));
  const Tensor ids = random_ids(cfg.vocab_size, 7);
  CHECK_THROWS_WITH(middle.forward(ids),
                    "Transformer: pipeline stage 1 runs forward_stage, not forward or hidden_states");
  CHECK_THROWS_WITH(middle.forward_stage(ids, Variable()),
                    "pipeline stage 1: expected the previous stage's hidden states [B, T, 16], got none");
  CHECK_THROWS_WITH(middle.embed_tokens(), "Transformer: pipeline stage 1 does not hold the token embedding");
  const StageOutput out = middle.forward_stage(ids, Variable(Tensor::zeros({2, 6, 16}, DType::Float64)));
  CHECK(out.output.shape() == Shape{2, 6, 16});
  CHECK_THROWS_WITH(middle.loss(ModelOutput{out.output, out.moe_aux}, ids),
                    "Transformer: pipeline stage 1 has no loss head");
}
