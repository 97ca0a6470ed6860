// LoRAAdapter: two bias-free Linear children, x -> A -> B scaled by alpha / r.
// LoRALinear: that update added to a frozen Linear or Nf4Linear base.
#include "nn/adapters/lora.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/parallel_ops.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/matmul.h"

namespace ember::nn {

namespace {
thread_local bool adapters_off = false;
}  // namespace

AdaptersOffGuard::AdaptersOffGuard() : previous_(adapters_off) { adapters_off = true; }
AdaptersOffGuard::~AdaptersOffGuard() { adapters_off = previous_; }
bool AdaptersOffGuard::active() { return adapters_off; }

static void check_options(const LoRAOptions& o) {
  EMBER_CHECK(o.r >= 1, "LoRA: r must be >= 1, got ", o.r);
  EMBER_CHECK(o.alpha > 0, "LoRA: alpha must be > 0, got ", o.alpha);
  EMBER_CHECK(o.dropout >= 0 && o.dropout < 1, "LoRA: dropout must be in [0, 1), got ", o.dropout);
}

template <class P>
static const P& non_null(const P& p, const char* what) {
  EMBER_CHECK(p != nullptr, "LoRA: the base ", what, " is null");
  return p;
}

LoRAAdapter::LoRAAdapter(int64_t in, int64_t out, const LoRAOptions& options, Generator& gen,
                         DType dtype, std::shared_ptr<Generator> dropout_gen)
    : options_(options), dropout_gen_(dropout_gen) {
  check_options(options_);
  EMBER_CHECK(options_.dropout == 0 || dropout_gen != nullptr, "LoRA: dropout ", options_.dropout,
              " needs a dropout generator");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  lora_a_ = register_module("lora_A", std::make_shared<Linear>(Tensor::rand({options_.r, in}, gen,
                                                                            dtype, -bound, bound)));
  lora_b_ =
      register_module("lora_B", std::make_shared<Linear>(Tensor::zeros({out, options_.r}, dtype)));
  if (options_.dropout > 0) {
    dropout_ = register_module("lora_dropout",
                               std::make_shared<Dropout>(options_.dropout, std::move(dropout_gen)));
  }
}

Variable LoRAAdapter::dropout_input(const Variable& x) const {
  if (!dropout_) return x;
  return mode_ == LoRAParallel::Row ? row_dropout(x) : dropout_->forward(x);
}

Variable LoRAAdapter::row_dropout(const Variable& x) const {
  if (!is_training()) return x;
  Shape whole = x.shape();
  const int64_t n = whole.back();
  whole.back() = whole_in_;
  const uint64_t offset = dropout_gen_->advance(static_cast<uint64_t>(shape_numel(whole)));
  // The whole input's mask (kept: 1 / (1 - p), dropped: 0) drawn as one rank draws it; x times
  // this rank's columns of it is one rank's dropout of x there, bit for bit.
  Tensor mask;
  {
    NoGradGuard no_grad;
    mask = dropout(Variable(Tensor::ones(whole, x.dtype())), options_.dropout, dropout_gen_->seed,
                   offset).data();
  }
  return mul(x, Variable(mask.narrow(mask.dim() - 1, tp_->rank() * n, n).contiguous()));
}

void LoRAAdapter::set_tensor_parallel(const ParallelGroup* group, LoRAParallel mode,
                                      int64_t whole_in) {
  EMBER_CHECK(mode == LoRAParallel::None || group != nullptr,
              "LoRA: tensor parallelism needs a group");
  tp_ = group;
  mode_ = mode;
  whole_in_ = whole_in;
}

Variable LoRAAdapter::forward(const Variable& x) const {
  if (adapters_off) {
    Shape shape = x.shape();
    shape.back() = lora_B().size(0);
    return Variable(Tensor::zeros(shape, x.dtype()));
  }
  if (mode_ == LoRAParallel::None)
    return mul_scalar(lora_b_->forward(lora_a_->forward(dropout_input(x))), scale());
  const Variable a = mode_ == LoRAParallel::Column ? copy_to_group(lora_A(), *tp_) : lora_A();
  Variable low = matmul(dropout_input(x), a, false, true);
  if (mode_ == LoRAParallel::Row) low = reduce_from_group(low, *tp_);
  return mul_scalar(matmul(low, lora_B(), false, true), scale());
}

Tensor LoRAAdapter::delta_weight() const {
  NoGradGuard no_grad;
  return kernels::mul_scalar(kernels::matmul(lora_B().data(), lora_A().data(), false, false),
                             scale());
}

LoRALinear::LoRALinear(std::shared_ptr<Linear> base, const LoRAOptions& options, Generator& gen,
                       std::shared_ptr<Generator> dropout_gen, LoRAWholeSize whole)
    : LoRAAdapter(whole.in > 0 ? whole.in : non_null(base, "Linear")->weight().size(1),
                  whole.out > 0 ? whole.out : non_null(base, "Linear")->out_features(), options, gen,
                  base->weight().dtype(), std::move(dropout_gen)),
      linear_(std::move(base)) {
  share_parameter("weight", linear_->weight()).set_requires_grad(false);
  if (linear_->bias().defined()) share_parameter("bias", linear_->bias()).set_requires_grad(false);
  if (linear_->added_rows().defined()) share_parameter("added_rows", linear_->added_rows());
}

LoRALinear::LoRALinear(std::shared_ptr<Nf4Linear> base, const LoRAOptions& options, Generator& gen,
                       std::shared_ptr<Generator> dropout_gen, DType dtype, LoRAWholeSize whole)
    : LoRAAdapter(whole.in > 0 ? whole.in : non_null(base, "Nf4Linear")->in_features(),
                  whole.out > 0 ? whole.out : non_null(base, "Nf4Linear")->out_features(), options,
                  gen, dtype, std::move(dropout_gen)),
      nf4_(std::move(base)) {
  if (nf4_->bias().defined()) share_parameter("bias", nf4_->bias()).set_requires_grad(false);
}

const UnaryModule& LoRALinear::base_module() const {
  return linear_ ? static_cast<const UnaryModule&>(*linear_) : *nf4_;
}

const Variable& LoRALinear::base_bias() const {
  return linear_ ? linear_->bias() : nf4_->bias();
}

Variable LoRALinear::forward(const Variable& x) const {
  if (adapters_off) return base_module().forward(x);
  return add(base_module().forward(x), LoRAAdapter::forward(x));
}

Variable LoRALinear::row_parallel_forward(const Variable& x, const ParallelGroup& g) const {
  const Variable y = nn::row_parallel_forward(base_module(), x, g);
  return adapters_off ? y : add(y, LoRAAdapter::forward(x));
}

Tensor LoRALinear::merged_weight() const {
  NoGradGuard no_grad;
  const Tensor delta = delta_weight();
  const Tensor w = linear_ ? linear_->full_weight() : nf4_->dequantized_weight(delta.dtype());
  return kernels::add(w, delta);
}

std::shared_ptr<Linear> LoRALinear::merge() const {
  Tensor bias;
  if (base_bias().defined()) bias = base_bias().data().clone();
  return std::make_shared<Linear>(merged_weight(), bias);
}

}  // namespace ember::nn
