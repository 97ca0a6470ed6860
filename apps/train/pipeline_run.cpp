// --pp P in the training runtime: the step's micro-batches through dist::PipelineRunner (ember
// train's token windows here, finetune's chat rows from chat_step.cpp), the held-out loss
// through the stages, and the checkpoint's tensors of the later stages sent to rank 0 (see
// pipeline_run.h).
#include "apps/train/pipeline_run.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "apps/train/step_phases.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/profiler.h"

namespace ember::apps {
namespace {

constexpr int kValidationTag = 10;  // a held-out batch's activations, stage s -> s + 1
constexpr int kStepsTag = 11;       // the checkpoint's parts, each stage's leader -> rank 0
constexpr int kTensorTag = 12;

// ZeRO-1 with tied embeddings, on the two end stages: the table's gradient is summed over them
// before the data-parallel reduction, not after. After it a rank holds only its shard of the
// averaged flat buffer, and the two stages' buffers (other parameters beside the table) cut the
// table at other places, so each rank would need pieces from several ranks of the other stage.
// Summed first (data rank d of stage 0 with data rank d of the last), the reduction averages the
// sum: both stages then update the table from the same averaged gradient, whatever their
// shards. The price: these two stages' reduction starts at the reducer's finish(), after the
// step's backward, instead of overlapping it.
bool tied_sum_first(const TrainRun& run) {
  return run.o.zero && run.cfg.tie_embeddings && (run.stage.first() || run.stage.last());
}

// ember train's micro-step u: the rank's batch [B, T + 1] of token windows, M micro-batches of
// B / M rows, each one's loss divided by M x A (its share of the step's mean).
class TokenWindows : public MicroBatches {
 public:
  TokenWindows(TrainRun& run, int64_t u)
      : M_(run.o.micro_batches), T_(run.o.seq_len),
        scale_(static_cast<double>(run.o.micro_batches * run.o.grad_accum)) {
    EMBER_PROFILE_PHASE(kDataPhase);
    EMBER_PROFILE_SCOPE(kDataFamily);
    batch_ = run.loader->batch(run.step, u);
  }

  Tensor inputs(int m) const override { return rows(batch_, m, M_, 0, T_); }

  nn::LossTerms loss(const nn::Transformer& model, const nn::StageOutput& out, int m,
                     StepResult& s) const override {
    nn::LossTerms l = model.stage_loss(out, rows(batch_, m, M_, 1, T_));
    s.ce += l.ce / scale_;
    s.z += l.z / scale_;
    s.aux += l.aux / scale_;
    if (l.total.defined()) l.total = l.total / scale_;
    return l;
  }

 private:
  const int64_t M_, T_;
  const double scale_;  // M x A
  Tensor batch_;
};

// One rank's stage over the micro-batches of one micro-step u of --grad-accum: the graphs of the
// micro-batches in flight, from the stage's input to its output and loss.
class StageStep {
 public:
  StageStep(TrainRun& run, StepResult& s, int64_t u, const MicroBatches& batches)
      : run_(run), s_(s), u_(u), M_(run.o.micro_batches), batches_(batches) {}

  dist::StageFunctions functions() {
    return {[this](int m, const Tensor& in) { return forward(m, in); },
            [this](int m, const Tensor& grad) { return backward(m, grad); }};
  }

 private:
  struct Live {
    Variable input;
    nn::StageOutput out;
    nn::LossTerms loss;
  };

  Tensor forward(int m, const Tensor& in) {
    EMBER_PROFILE_PHASE(kForwardPhase);
    const nn::Transformer& model = *run_.model;
    Live l;
    if (!model.stage().first()) l.input = Variable(in).set_requires_grad(true);
    l.out = model.forward_stage(batches_.inputs(m), l.input, batches_.real(m));
    l.loss = batches_.loss(model, l.out, m, s_);
    const Tensor out = model.stage().last() ? Tensor() : l.out.output.data();
    live_[m] = std::move(l);
    return out;
  }

  // One backward pass from the stage's output (seeded by the next stage's gradient) and its loss.
  Tensor backward(int m, const Tensor& grad) {
    EMBER_PROFILE_PHASE(kBackwardPhase);
    dist::Reducer* reducer = run_.optimization.reducer.get();
    // The data-parallel all-reduce runs during the step's last backward (with tied_sum_first,
    // from finish()).
    const bool last = u_ == run_.o.grad_accum - 1 && m == M_ - 1;
    if (reducer) reducer->set_sync(last && !tied_sum_first(run_));
    Live& l = live_.at(m);
    std::vector<Variable> roots;
    std::vector<Tensor> seeds;
    if (!run_.stage.last()) {
      roots.push_back(l.out.output);
      seeds.push_back(grad);
    }
    if (l.loss.total.defined()) {
      roots.push_back(l.loss.total);
      seeds.emplace_back();
    }
    ember::backward(roots, seeds);
    const Tensor grad_in = run_.stage.first() ? Tensor() : l.input.grad();
    live_.erase(m);
    return grad_in;
  }

  TrainRun& run_;
  StepResult& s_;
  const int64_t u_, M_;
  const MicroBatches& batches_;
  std::map<int, Live> live_;
};

// The sum over the stages of each value (every stage holds it after).
void sum_over_stages(const TrainRun& run, std::vector<double*> values) {
  std::vector<double> v;
  for (double* x : values) v.push_back(*x);
  Tensor t = Tensor::from_vector(v);
  run.pp_group->all_reduce_sum(t);
  v = t.to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i) *values[i] = v[i];
}

// Every stage's forward, backward and wait milliseconds, on every rank of the pipeline.
void gather_stage_times(const TrainRun& run, const dist::PipelineTimes& t, StepResult& s) {
  const size_t P = static_cast<size_t>(run.pp_group->size()), at = static_cast<size_t>(run.stage.stage);
  std::vector<double> v(3 * P, 0.0);
  v[at] = t.forward * 1e3;
  v[P + at] = t.backward * 1e3;
  v[2 * P + at] = t.wait * 1e3;
  Tensor all = Tensor::from_vector(v);
  run.pp_group->all_reduce_sum(all);
  v = all.to_vector<double>();
  s.stage_forward_ms.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(P));
  s.stage_backward_ms.assign(v.begin() + static_cast<std::ptrdiff_t>(P), v.begin() + static_cast<std::ptrdiff_t>(2 * P));
  s.stage_wait_ms.assign(v.begin() + static_cast<std::ptrdiff_t>(2 * P), v.end());
}

}  // namespace

double idle_share(const std::vector<double>& forward, const std::vector<double>& backward,
                  const std::vector<double>& wait) {
  // The stages start together; the pipeline's span is the longest stage's forward + backward +
  // wait (a stage that finishes early idles until then, outside its own waits).
  double span = 0, busy = 0;
  for (size_t i = 0; i < wait.size(); ++i) {
    span = std::max(span, forward[i] + backward[i] + wait[i]);
    busy += forward[i] + backward[i];
  }
  return span > 0 ? 1 - busy / (span * static_cast<double>(wait.size())) : 0;
}

double idle_share(const StepResult& s) {
  return idle_share(s.stage_forward_ms, s.stage_backward_ms, s.stage_wait_ms);
}

bool is_tied_copy(const TrainRun& run, const std::string& name) {
  return run.pp_group && run.stage.last() && run.cfg.tie_embeddings && name == "model.embed_tokens.weight";
}

void pipeline_forward_backward(TrainRun& run, StepResult& s) {
  pipeline_forward_backward(run, s, [&run](int64_t u) { return std::make_unique<TokenWindows>(run, u); });
}

void pipeline_forward_backward(TrainRun& run, StepResult& s, const MicroStep& micro_step) {
  dist::PipelineTimes times;
  {
    AutocastGuard mixed(run.autocast);
    for (int64_t u = 0; u < run.o.grad_accum; ++u) {
      const std::unique_ptr<MicroBatches> batches = micro_step(u);
      StageStep step(run, s, u, *batches);
      const dist::PipelineTimes t = run.pipeline->run(step.functions());
      times.forward += t.forward;
      times.backward += t.backward;
      times.wait += t.wait + t.send_wait;
    }
  }
  gather_stage_times(run, times, s);
  {
    EMBER_PROFILE_PHASE(kCommWaitPhase);
    // A LoRA run's table is frozen: no gradient to sum.
    const bool tied = run.cfg.tie_embeddings && (run.stage.first() || run.stage.last()) &&
                      run.model->embed_tokens().weight().requires_grad();
    auto sum_tied = [&run] {
      dist::sum_tied_gradient(*run.pp_group, run.model->embed_tokens().weight().grad());
    };
    if (tied && tied_sum_first(run)) sum_tied();
    if (run.optimization.reducer) run.optimization.reducer->finish();
    if (tied && !tied_sum_first(run)) sum_tied();  // plain: .grad is the averaged gradient now
  }
  sum_over_stages(run, {&s.ce, &s.z, &s.aux});
}

namespace {

// A held-out batch x [B, T] through this stage (no graph): the previous stage's activations
// received, this stage's output sent on to the next.
nn::StageOutput evaluate_stage(const TrainRun& run, const Tensor& x) {
  const nn::Transformer& model = *run.model;
  const dist::Group& pipeline = *run.pp_group;
  const int s = pipeline.rank();
  Variable in;
  if (!model.stage().first()) {
    Tensor received = Tensor::empty({x.size(0), x.size(1), run.cfg.d_model}, DType::Float32);
    pipeline.recv(received, s - 1, kValidationTag);
    in = Variable(received);
  }
  nn::StageOutput out = model.forward_stage(x, in);
  if (!model.stage().last()) pipeline.send(out.output.data().contiguous(), s + 1, kValidationTag);
  return out;
}

}  // namespace

ShardLoss pipeline_shard_loss(TrainRun& run) {
  nn::Transformer& model = *run.model;
  const nn::EvalModeGuard eval(model);
  const NoGradGuard no_grad;
  const int64_t T = run.val_loader->options().seq_len;
  ShardLossSums sums;
  for (int64_t i = 0; i < run.eval_batches; ++i) {
    const Tensor b = run.val_loader->batch(i, 0);
    const Tensor x = b.narrow(1, 0, T).contiguous(), y = b.narrow(1, 1, T).contiguous();
    const nn::StageOutput out = evaluate_stage(run, x);
    sums.add(model.stage_loss(out, y));
    if (model.stage().first()) sums.count_targets(y, run.token_bytes);
  }
  double tokens = static_cast<double>(sums.tokens), bytes = static_cast<double>(sums.bytes);
  sum_over_stages(run, {&sums.ce, &sums.total, &sums.z, &sums.aux, &sums.router_z, &tokens, &bytes});
  sums.tokens = static_cast<int64_t>(tokens);
  sums.bytes = static_cast<int64_t>(bytes);
  return sums.mean(!run.token_bytes.empty());
}

ShardLoss pipeline_chat_loss(TrainRun& run) {
  nn::Transformer& model = *run.model;
  const nn::EvalModeGuard eval(model);
  ShardLoss r = chat_shard_loss(run.chat_val_rows, run.data_world * run.o.batch_size, run.token_bytes,
                                [&](const Tensor& x, const Tensor& y, const Tensor& weight) {
                                  const nn::StageOutput out = evaluate_stage(run, x);
                                  return model.stage().last() ? model.stage_loss(out, y, weight, 1.0, 0.0)
                                                              : nn::LossTerms{};
                                });
  // The counts are every stage's; the loss is the last stage's (0 on the others), and bits
  // per byte is linear in it.
  sum_over_stages(run, {&r.loss, &r.total, &r.z, &r.bits_per_byte});
  return r;
}

namespace {

bool sends_to_root(const TrainRun& run) { return run.pp_group && run.stage.stage > 0 && run.slice_leader(); }

void send_text(const dist::Group& g, const std::string& text) {
  g.send(Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(text.size())}), 0, kStepsTag);
  if (!text.empty()) g.send(Tensor::from_vector(std::vector<int32_t>(text.begin(), text.end())), 0, kStepsTag);
}

std::string receive_text(const dist::Group& g, int stage) {
  Tensor n = Tensor::empty({1}, DType::Int64);
  g.recv(n, stage, kStepsTag);
  const int64_t size = n.to_vector<int64_t>()[0];
  if (size == 0) return "";
  Tensor chars = Tensor::empty({size}, DType::Int32);
  g.recv(chars, stage, kStepsTag);
  const std::vector<int32_t> v = chars.to_vector<int32_t>();
  return std::string(v.begin(), v.end());
}

}  // namespace

void send_param_steps(const TrainRun& run, const std::map<std::string, int64_t>& steps) {
  if (sends_to_root(run)) send_text(*run.pp_group, nlohmann::json(steps).dump());
}

std::map<std::string, int64_t> receive_param_steps(const TrainRun& run) {
  std::map<std::string, int64_t> out;
  for (int s = 1; run.pp_group && s < run.pp_group->size(); ++s) {
    const auto steps = nlohmann::json::parse(receive_text(*run.pp_group, s)).get<std::map<std::string, int64_t>>();
    out.insert(steps.begin(), steps.end());
  }
  return out;
}

// Each tensor goes as a header (its name and shape, JSON) on kStepsTag, then its float32
// elements on kTensorTag; an empty header ends a stage's part.
nn::TensorPut send_stage_tensors(const TrainRun& run) {
  if (!sends_to_root(run)) return {};
  return [&run](const std::string& name, const Tensor& t) {
    if (is_tied_copy(run, name.substr(0, name.rfind('/')))) return;
    EMBER_CHECK(t.dtype() == DType::Float32, "checkpoint: ", name, " is ", dtype_name(t.dtype()), ", not float32");
    send_text(*run.pp_group, nlohmann::json{{"name", name}, {"shape", t.shape()}}.dump());
    run.pp_group->send(t.contiguous(), 0, kTensorTag);
  };
}

void end_stage_tensors(const TrainRun& run) {
  if (sends_to_root(run)) send_text(*run.pp_group, "");
}

void receive_stage_tensors(const TrainRun& run, const nn::TensorPut& put) {
  for (int s = 1; run.pp_group && s < run.pp_group->size(); ++s) {
    for (std::string header = receive_text(*run.pp_group, s); !header.empty(); header = receive_text(*run.pp_group, s)) {
      const nlohmann::json h = nlohmann::json::parse(header);
      Tensor t = Tensor::empty(h.at("shape").get<Shape>(), DType::Float32);
      run.pp_group->recv(t, s, kTensorTag);
      put(h.at("name").get<std::string>(), t);
    }
  }
}

}  // namespace ember::apps
