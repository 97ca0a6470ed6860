// --tp T in the training runtime: checks and the tensor group (setup), whole tensors from and
// to shards (checkpoints), and the global gradient norm.
#include "apps/train/tensor_parallel_run.h"

#include <algorithm>
#include <cmath>

#include "apps/train/pipeline_run.h"
#include "dist/group.h"
#include "dist/reducer.h"
#include "nn/adapters/adapters.h"
#include "nn/tensor_parallel.h"
#include "optim/clip.h"

namespace ember::apps {
namespace {

// The parameter a state key names: "<name>/exp_avg" -> "<name>"; a parameter's name as it is.
std::string parameter_of(const std::string& key) {
  const size_t slash = key.rfind('/');
  return slash == std::string::npos ? key : key.substr(0, slash);
}

}  // namespace

std::map<std::string, Tensor> shard_state(const TrainRun& run, const std::map<std::string, Tensor>& whole) {
  if (!run.tp_group) return whole;
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : whole)
    out.emplace(key, nn::tensor_shard(t, nn::tensor_split(parameter_of(key)), run.tp_group->rank(),
                                      run.tp_group->size()));
  return out;
}

namespace {

// The whole tensor of a shard of parameter `name` (collective over the tensor group): each rank
// places its shard in a zero tensor of the padded whole's shape, the sum over the group is the
// whole; a vocabulary's padding rows are then cut.
Tensor gather_whole(const TrainRun& run, const std::string& name, const Tensor& shard) {
  if (!run.tp_group) return shard;
  const dist::Group& g = *run.tp_group;
  const nn::TensorSplit split = nn::tensor_split(name);
  if (split == nn::TensorSplit::Whole) return shard;
  const int64_t dim = split == nn::TensorSplit::Columns ? 1 : 0, n = shard.size(dim);
  Shape shape = shard.shape();
  shape[static_cast<size_t>(dim)] = n * g.size();
  Tensor whole = Tensor::zeros(shape, shard.dtype());
  whole.narrow(dim, g.rank() * n, n).copy_(shard);
  g.all_reduce_sum(whole);
  return split == nn::TensorSplit::VocabRows ? whole.narrow(0, 0, run.cfg.vocab_size).contiguous() : whole;
}

}  // namespace

void gather_model(const TrainRun& run, const nn::TensorPut& put) {
  // A LoRA checkpoint holds the trained tensors only (docs/formats.md#fine-tune-checkpoints).
  for (const auto& [name, p] : run.cfg.lora ? nn::trainable_parameters(*run.model) : run.model->named_parameters()) {
    const Tensor whole = gather_whole(run, name, p.data());
    if (put) put(name, whole);
  }
}

optim::Optimizer::StateSink gathering_sink(const TrainRun& run, optim::Optimizer::StateSink put) {
  return [&run, put](const std::string& key, const Tensor& shard) {
    const Tensor whole = gather_whole(run, parameter_of(key), shard.contiguous());
    if (put) put(key, whole);
  };
}

optim::Optimizer::StateSource sharding_source(const TrainRun& run, optim::Optimizer::StateSource get) {
  return [&run, get](const std::string& key) {
    const Tensor whole = get(key);
    if (!whole.defined()) return whole;
    return nn::tensor_shard(whole, nn::tensor_split(parameter_of(key)), run.tp_group->rank(),
                            run.tp_group->size());
  };
}

namespace {

// The squares of a rank's gradients: those of split parameters (summed over the tensor group
// after) and those of whole ones (the same on every tensor rank: taken once); the tied table's
// last-stage copy in neither.
struct GradSquares {
  double split = 0, whole = 0;
};

bool counted_as_split(const TrainRun& run, const std::string& name) {
  return run.tp_group && nn::tensor_split(name) != nn::TensorSplit::Whole;
}

GradSquares local_squares(const TrainRun& run) {
  std::vector<Variable> split, whole;
  for (const auto& [name, p] : run.model->named_parameters()) {
    if (is_tied_copy(run, name)) continue;
    (counted_as_split(run, name) ? split : whole).push_back(p);
  }
  const double split_norm = optim::grad_norm(split), whole_norm = optim::grad_norm(whole);
  return {split_norm * split_norm, whole_norm * whole_norm};
}

double sum_of_squares(const Tensor& t) {
  double sum = 0;
  dispatch_float(t.dtype(), "gradient norm", [&](auto tag) {
    using T = decltype(tag);
    const T* d = t.numel() ? t.data<T>() : nullptr;
    for (int64_t i = 0; i < t.numel(); ++i) sum += static_cast<double>(d[i]) * d[i];
  });
  return sum;
}

// ZeRO-1: a data rank holds the averaged gradient of its shard of the reducer's flat buffer only
// (dist::ZeroAdamW updates it). Each parameter's part of the shard is counted by the
// parameter's kind; every element lies in one rank's shard, so the sums over the data ranks
// are the slice's.
GradSquares shard_squares(const TrainRun& run) {
  const dist::Reducer& reducer = *run.optimization.reducer;
  const Tensor& grad = reducer.shard_grad();
  const int r = reducer.comm().rank();
  std::vector<double> sq{0, 0};
  for (const auto& [name, p] : run.model->named_parameters()) {
    const int64_t i = reducer.index_of(p);
    if (i < 0 || is_tied_copy(run, name)) continue;
    const size_t k = static_cast<size_t>(i), b = reducer.bucket_of(k);
    const int64_t at = reducer.flat_offset(k), piece = reducer.piece_begin(b, r);
    const int64_t lo = std::max(at, piece), hi = std::min(at + p.numel(), reducer.piece_begin(b, r + 1));
    if (lo >= hi) continue;
    const Tensor part = grad.narrow(0, reducer.shard_offset(b) + lo - piece, hi - lo);
    sq[counted_as_split(run, name) ? 0 : 1] += sum_of_squares(part);
  }
  sq = reducer.comm().all_reduce(sq, dist::ReduceOp::Sum);
  return {sq[0], sq[1]};
}

}  // namespace

double parallel_grad_norm(const TrainRun& run) {
  const GradSquares mine = run.o.zero ? shard_squares(run) : local_squares(run);
  Tensor sq = Tensor::from_vector(std::vector<double>{mine.split}, {1});
  if (run.tp_group) run.tp_group->all_reduce_sum(sq);
  sq = Tensor::from_vector(std::vector<double>{sq.to_vector<double>()[0] + mine.whole}, {1});
  if (run.pp_group) run.pp_group->all_reduce_sum(sq);
  return std::sqrt(sq.to_vector<double>()[0]);
}

}  // namespace ember::apps
