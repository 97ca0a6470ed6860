// --tp T in the training runtime: checks and the tensor group (setup), whole tensors from and
// to shards (checkpoints), and the global gradient norm.
#include "apps/train/tensor_parallel_run.h"

#include <cmath>

#include "apps/train/pipeline_run.h"
#include "dist/group.h"
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
  for (const auto& [name, p] : run.model->named_parameters()) {
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

double parallel_grad_norm(const TrainRun& run) {
  std::vector<Variable> split, whole;
  for (const auto& [name, p] : run.model->named_parameters()) {
    if (is_tied_copy(run, name)) continue;
    (run.tp_group && nn::tensor_split(name) != nn::TensorSplit::Whole ? split : whole).push_back(p);
  }
  const double split_norm = optim::grad_norm(split), whole_norm = optim::grad_norm(whole);
  Tensor sq = Tensor::from_vector(std::vector<double>{split_norm * split_norm}, {1});
  if (run.tp_group) run.tp_group->all_reduce_sum(sq);
  sq = Tensor::from_vector(std::vector<double>{sq.to_vector<double>()[0] + whole_norm * whole_norm}, {1});
  if (run.pp_group) run.pp_group->all_reduce_sum(sq);
  return std::sqrt(sq.to_vector<double>()[0]);
}

}  // namespace ember::apps
