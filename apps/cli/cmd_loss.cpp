// `ember loss` (old spelling, still accepted: `ember eval`): mean loss and bits per byte of a
// checkpoint over N sequential batches of token shards (apps/train/shard_loss.h, the loss
// `ember train` validates with), and with --grads-out the loss terms and the gradient of the
// mean total loss w.r.t. every parameter, in a new HDF5 file (docs/formats.md#gradients-file).
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "apps/cli/commands.h"
#include "apps/cli/moved_base_option.h"
#include "apps/train/shard_loss.h"
#include "apps/common/model_io.h"
#include "autograd/autocast.h"
#include "core/io/hdf5_file.h"
#include "core/io/atomic_file.h"
#include "data/batch_loader.h"

namespace ember::apps {
namespace {
namespace fs = std::filesystem;

struct EvalOptions {
  std::string checkpoint, data, grads_out, dtype = "float32", base;
  int64_t batch_size = 8, seq_len = 0, batches = 0;
};

// --grads-out never replaces a file: refused before the evaluation runs.
void check_new_output(const std::string& path) {
  std::error_code ec;
  EMBER_CHECK(!fs::exists(fs::symlink_status(path, ec)), "--grads-out ", path,
              ": the file exists; give a path that does not (ember loss never overwrites a file)");
  const fs::path parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  EMBER_CHECK(fs::is_directory(parent, ec), "--grads-out ", path, ": no such folder ", parent.string());
}

// The loss terms and every parameter's gradient, written to a temporary file beside
// `path` and renamed to it at the end: `path` is either absent or complete.
void write_grads(const std::string& path, const ShardLoss& r, const nn::Transformer& model) {
  const fs::path target(path);
  const fs::path tmp = (target.has_parent_path() ? target.parent_path() : fs::path(".")) /
                       ("." + target.filename().string() + ".tmp" + std::to_string(::getpid()));
  try {
    H5File f(tmp.string(), H5File::Mode::Create);
    f.write_tensor("/loss/total", Tensor::scalar(r.total, DType::Float64));
    f.write_tensor("/loss/ce", Tensor::scalar(r.loss, DType::Float64));
    f.write_tensor("/loss/z", Tensor::scalar(r.z, DType::Float64));
    f.write_tensor("/loss/aux", Tensor::scalar(r.aux, DType::Float64));
    f.write_tensor("/loss/router_z", Tensor::scalar(r.router_z, DType::Float64));
    for (const auto& [name, v] : model.named_parameters()) {
      f.write_tensor("/grads/" + name, v.grad().defined() ? v.grad() : Tensor::zeros(v.shape()));
    }
    f.close();
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  // fsync, rename never over a file, fsync of the folder (core/io/atomic_file.h)
  EMBER_CHECK(commit_new_file(tmp.string(), path), "--grads-out ", path,
              ": the file appeared while ember loss ran; not overwritten");
}

// `ember NAME`: `loss`, or `eval`, its old spelling (same options, same output).
CommandRunner add_shard_loss_command(CLI::App& app, const std::string& name, const std::string& description) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* sub = app.add_subcommand(name, description);
  sub->add_option("--checkpoint", o->checkpoint, "checkpoint (.h5)")->required()->check(CLI::ExistingFile);
  add_moved_base_option(*sub, o->base);
  sub->add_option("--data", o->data, "token shards: a .bin file, a folder or a glob")->required();
  sub->add_option("--batch-size", o->batch_size, "rows per batch")->capture_default_str();
  sub->add_option("--seq-len", o->seq_len, "tokens per row (0: the model's max_seq_len)");
  sub->add_option("--batches", o->batches, "batches to average (0: all whole batches)");
  sub->add_option("--grads-out", o->grads_out, "write loss terms and parameter gradients to this new HDF5 file (never overwritten)");
  sub->add_option("--dtype", o->dtype, "matmul precision: float32, or bf16 (bfloat16 operands, float32 results)")
      ->capture_default_str();
  return [o, name]() {
    EMBER_CHECK(o->batch_size > 0, "--batch-size must be positive, got ", o->batch_size);
    EMBER_CHECK(o->seq_len >= 0, "--seq-len must be positive (or 0: the model's max_seq_len), got ", o->seq_len);
    EMBER_CHECK(o->batches >= 0, "--batches must be positive (or 0: all whole batches), got ", o->batches);
    const bool grads = !o->grads_out.empty();
    if (grads) check_new_output(o->grads_out);
    AutocastGuard mixed(parse_autocast_dtype(o->dtype));  // forward and backward
    LoadedModel lm = load_model(o->checkpoint, o->base);
    nn::Transformer& model = *lm.model;
    const nn::ModelConfig& cfg = model.config();
    const int64_t T = o->seq_len > 0 ? o->seq_len : cfg.max_seq_len;
    EMBER_CHECK(T <= cfg.max_seq_len, "--seq-len ", T, " exceeds the model's max_seq_len ", cfg.max_seq_len);
    auto data = std::make_shared<data::TokenDataset>(o->data);
    const uint32_t max_id = data::max_token_id(*data);
    EMBER_CHECK(static_cast<int64_t>(max_id) < cfg.vocab_size, "--data: ", o->data,
                " holds token ids outside the model's vocabulary (", cfg.vocab_size, ")");
    data::BatchLoader loader(data, {o->batch_size, T, 1, 1, 0, /*sequential=*/true, 0});
    EMBER_CHECK(o->batch_size <= loader.num_windows(), "--batch-size ", o->batch_size, " exceeds the ",
                loader.num_windows(), " windows of ", T + 1, " tokens in --data ", o->data);
    const int64_t n = o->batches > 0 ? o->batches : std::max<int64_t>(1, loader.num_windows() / o->batch_size);
    // Bits per byte with the checkpoint's tokenizer; bits per token without one.
    std::vector<int64_t> token_bytes;
    if (lm.has_tokenizer && max_id < lm.tokenizer.vocab_size()) {
      token_bytes = token_byte_lengths(lm.tokenizer, cfg.vocab_size);
    } else if (lm.has_tokenizer) {
      std::fprintf(stderr, "ember %s: warning: --data holds token id %u, outside the checkpoint's tokenizer (%zu tokens): "
                   "bits per token, not per byte\n", name.c_str(), max_id, lm.tokenizer.vocab_size());
    }
    model.zero_grad();
    const ShardLoss r = shard_loss(model, loader, n, token_bytes, grads);
    std::printf("loss %.6f (ce) over %lld batches of %lld x %lld tokens; ", r.loss, static_cast<long long>(n),
                static_cast<long long>(o->batch_size), static_cast<long long>(T));
    if (r.per_byte) {
      std::printf("%.6f bits per byte (%lld tokens, %lld bytes)", r.bits_per_byte, static_cast<long long>(r.tokens),
                  static_cast<long long>(r.bytes));
    } else {
      std::printf("%.6f bits per token (no tokenizer)", r.bits_per_byte);
    }
    std::printf("; total %.6f\n", r.total);
    if (grads) {
      write_grads(o->grads_out, r, model);
      std::printf("wrote %s\n", o->grads_out.c_str());
    }
    return 0;
  };
}

}  // namespace

CommandRunner add_loss_command(CLI::App& app) {
  return add_shard_loss_command(app, "loss", "Mean loss and bits per byte of a checkpoint over sequential batches of token shards");
}

CommandRunner add_eval_command(CLI::App& app) {
  return add_shard_loss_command(app, "eval", "The old spelling of `ember loss` (same options and output)");
}

}  // namespace ember::apps
