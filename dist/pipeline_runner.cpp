// PipelineRunner: a stage's schedule with point-to-point activations and gradients; the tied
// table's gradient over the two end stages.
#include "dist/pipeline_runner.h"

#include <algorithm>
#include <chrono>

#include "core/kernels/elementwise.h"

namespace ember::dist {
namespace {

constexpr int kActivationTag = 1;  // stage s -> s + 1, micro-batches in order
constexpr int kGradientTag = 2;    // stage s + 1 -> s, micro-batches in order
constexpr int kTiedTag = 3;        // first <-> last stage

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

PipelineRunner::PipelineRunner(Group& pipeline, ScheduleKind kind, int micro_batches, Shape shape,
                               DType dtype)
    : pipeline_(pipeline), stage_(pipeline.rank()), stages_(pipeline.size()),
      micro_batches_(micro_batches), shape_(std::move(shape)), dtype_(dtype),
      ops_(schedule(kind, stages_, stage_, micro_batches)),
      live_(static_cast<size_t>(std::max(micro_batches, 0)), 0) {
  EMBER_CHECK(dtype == DType::Float32 || dtype == DType::Float64,
              "PipelineRunner: activations must be float32 or float64, got ", dtype_name(dtype));
}

PipelineTimes PipelineRunner::run(const StageFunctions& f) {
  EMBER_CHECK(f.forward && f.backward, "PipelineRunner: needs a forward and a backward function");
  PipelineTimes t;
  std::fill(live_.begin(), live_.end(), 0);
  in_flight_ = 0;
  for (const PipelineOp& op : ops_) {
    if (op.pass == Pass::Forward) {
      forward(op.micro_batch, f, t);
    } else {
      backward(op.micro_batch, f, t);
    }
    progress_sends();
  }
  const Clock::time_point start = Clock::now();
  for (PendingSend& s : sends_) pipeline_.wait(s.request);
  sends_.clear();
  t.send_wait = seconds_since(start);
  return t;
}

void PipelineRunner::forward(int m, const StageFunctions& f, PipelineTimes& t) {
  const Tensor input = stage_ > 0 ? receive(stage_ - 1, kActivationTag, t) : Tensor();
  const Clock::time_point start = Clock::now();
  const Tensor output = f.forward(m, input);
  t.forward += seconds_since(start);
  live_[static_cast<size_t>(m)] = 1;
  t.peak_in_flight = std::max(t.peak_in_flight, ++in_flight_);
  if (stage_ + 1 < stages_) send(output, stage_ + 1, kActivationTag, "output");
}

void PipelineRunner::backward(int m, const StageFunctions& f, PipelineTimes& t) {
  EMBER_CHECK(live_[static_cast<size_t>(m)], "PipelineRunner: stage ", stage_,
              " backward of micro-batch ", m, " before its forward");
  const Tensor grad_output = stage_ + 1 < stages_ ? receive(stage_ + 1, kGradientTag, t) : Tensor();
  const Clock::time_point start = Clock::now();
  const Tensor grad_input = f.backward(m, grad_output);
  t.backward += seconds_since(start);
  live_[static_cast<size_t>(m)] = 0;
  --in_flight_;
  if (stage_ > 0) send(grad_input, stage_ - 1, kGradientTag, "input gradient");
}

Tensor PipelineRunner::receive(int peer, int tag, PipelineTimes& t) {
  Tensor buffer = Tensor::empty(shape_, dtype_);
  const Clock::time_point start = Clock::now();
  pipeline_.recv(buffer, peer, tag);
  t.wait += seconds_since(start);
  return buffer;
}

void PipelineRunner::send(const Tensor& t, int peer, int tag, const char* what) {
  EMBER_CHECK(t.defined() && t.shape() == shape_ && t.dtype() == dtype_, "PipelineRunner: stage ",
              stage_, "'s ", what, " must be ", shape_str(shape_), " ", dtype_name(dtype_), ", got ",
              t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : "none");
  PendingSend s{Request(), t.contiguous()};
  s.request = pipeline_.isend(s.buffer, peer, tag);
  sends_.push_back(std::move(s));
}

void PipelineRunner::progress_sends() {
  std::erase_if(sends_, [this](PendingSend& s) { return pipeline_.test(s.request); });
}

void sum_tied_gradient(Group& pipeline, const Tensor& grad) {
  const int P = pipeline.size(), s = pipeline.rank();
  if (P == 1 || (s != 0 && s != P - 1)) return;
  EMBER_CHECK(grad.defined() && grad.is_contiguous() &&
                  (grad.dtype() == DType::Float32 || grad.dtype() == DType::Float64),
              "sum_tied_gradient: stage ", s, " needs the table's gradient, contiguous float32/64");
  const int peer = s == 0 ? P - 1 : 0;
  Tensor other = Tensor::empty(grad.shape(), grad.dtype());
  Request sent = pipeline.isend(grad, peer, kTiedTag);
  pipeline.recv(other, peer, kTiedTag);
  pipeline.wait(sent);  // before grad changes
  Tensor sum = grad;
  kernels::add_(sum, other);  // a + b == b + a: both ends hold the same sum
}

}  // namespace ember::dist
