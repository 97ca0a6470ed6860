// `ember eval`: mean loss of a checkpoint over N sequential batches of token
// shards, and with --grads-out the loss terms and the gradient of the mean
// total loss w.r.t. every parameter, in an HDF5 file (SPEC.md section 8).
#include <cmath>
#include <cstdio>

#include "apps/commands.h"
#include "apps/model_io.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/hdf5_file.h"
#include "data/batch_loader.h"

namespace ember::apps {
namespace {

struct EvalOptions {
  std::string checkpoint, data, grads_out, dtype = "float32";
  int64_t batch_size = 8, seq_len = 0, batches = 0;
};

}  // namespace

CommandRunner add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* sub = app.add_subcommand("eval", "Mean loss of a checkpoint over sequential batches of token shards");
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5)")->required()->check(CLI::ExistingFile);
  sub->add_option("--data", o->data, "token shards: a .bin file, a folder or a glob")->required();
  sub->add_option("--batch-size", o->batch_size, "rows per batch")->capture_default_str();
  sub->add_option("--seq-len", o->seq_len, "tokens per row (0: the model's max_seq_len)");
  sub->add_option("--batches", o->batches, "batches to average (0: all whole batches)");
  sub->add_option("--grads-out", o->grads_out, "write loss terms and parameter gradients to this HDF5 file");
  sub->add_option("--dtype", o->dtype, "matmul precision: float32, or bf16 (bfloat16 operands, float32 results)")
      ->capture_default_str();
  return [o]() {
    AutocastGuard mixed(parse_autocast_dtype(o->dtype));  // forward and backward
    LoadedModel lm = load_model(o->checkpoint);
    nn::Transformer& model = *lm.model;
    const nn::ModelConfig& cfg = model.config();
    const int64_t T = o->seq_len > 0 ? o->seq_len : cfg.max_seq_len;
    EMBER_CHECK(T <= cfg.max_seq_len, "--seq-len ", T, " exceeds the model's max_seq_len ", cfg.max_seq_len);
    EMBER_CHECK(o->batch_size > 0, "--batch-size must be positive");
    auto data = std::make_shared<TokenDataset>(o->data);
    EMBER_CHECK(static_cast<int64_t>(max_token_id(*data)) < cfg.vocab_size, "--data: ", o->data,
                " holds token ids outside the model's vocabulary (", cfg.vocab_size, ")");
    BatchLoader loader(data, {o->batch_size, T, 1, 1, 0, /*sequential=*/true, 0});
    const int64_t n = o->batches > 0 ? o->batches : std::max<int64_t>(1, loader.num_windows() / o->batch_size);
    const bool grads = !o->grads_out.empty();
    model.zero_grad();
    double total = 0, ce = 0, z = 0, aux = 0, rz = 0;
    for (int64_t i = 0; i < n; ++i) {
      const Tensor b = loader.batch(i, 0);
      const Tensor x = b.narrow(1, 0, T).contiguous(), y = b.narrow(1, 1, T).contiguous();
      std::unique_ptr<NoGradGuard> no_grad = grads ? nullptr : std::make_unique<NoGradGuard>();
      nn::LossTerms l = model.loss(model.forward(x), y);
      if (grads) (l.total / static_cast<double>(n)).backward();
      total += l.total.item() / n;
      ce += l.ce / n;
      z += l.z / n;
      aux += l.aux / n;
      rz += l.router_z / n;
    }
    std::printf("loss %.6f (ce) over %lld batches of %lld x %lld tokens", ce, static_cast<long long>(n),
                static_cast<long long>(o->batch_size), static_cast<long long>(T));
    if (lm.tokenizer.vocab_size() <= 257 && lm.tokenizer.model().vocab_size() <= 257) {
      std::printf(", %.4f bits per byte", ce / std::log(2.0));
    }
    std::printf("; total %.6f\n", total);
    if (grads) {
      H5File f(o->grads_out, H5File::Mode::Create);
      f.write_tensor("/loss/total", Tensor::scalar(total, DType::Float64));
      f.write_tensor("/loss/ce", Tensor::scalar(ce, DType::Float64));
      f.write_tensor("/loss/z", Tensor::scalar(z, DType::Float64));
      f.write_tensor("/loss/aux", Tensor::scalar(aux, DType::Float64));
      f.write_tensor("/loss/router_z", Tensor::scalar(rz, DType::Float64));
      for (const auto& [name, v] : model.named_parameters()) {
        f.write_tensor("/grads/" + name, v.grad().defined() ? v.grad() : Tensor::zeros(v.shape()));
      }
      f.close();
      std::printf("wrote %s\n", o->grads_out.c_str());
    }
    return 0;
  };
}

}  // namespace ember::apps
