// --tp T in the training runtime: checks and the tensor group (setup), whole tensors from and
// to shards (checkpoints), and the global gradient norm.
#include "apps/train/tensor_parallel_run.h"

#include <cmath>

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

// The options --tp does not combine with yet: "" when none.
std::string refused_with_tp(const TrainOptions& o, int64_t world) {
  const long long T = o.tp;
  if (world % o.tp != 0)
    return "--tp " + std::to_string(T) + " needs a world size divisible by " + std::to_string(T) +
           ", got " + std::to_string(world);
  if (o.zero) return "--tp and --zero cannot be combined yet (use --zero 0)";
  if (o.checkpoint_activations || o.checkpoint_every)
    return "--tp and --checkpoint-activations cannot be combined yet";
  if (o.dtype != "float32") return "--tp and --dtype " + o.dtype + " cannot be combined yet";
  if (o.sample_tokens > 0) return "--tp and --sample-tokens cannot be combined yet (sample with ember generate)";
  return "";
}

}  // namespace

void setup_tensor_parallel(TrainRun& run) {
  if (run.o.tp == 1) return;
  agreed(run.comm, [&] {
    const std::string refused = refused_with_tp(run.o, run.world);
    EMBER_CHECK(refused.empty(), refused);
    nn::check_tensor_parallel(run.cfg, run.o.tp);
  });
  const int tensor_rank = static_cast<int>(run.comm.rank() % run.o.tp);
  run.tp_group = std::make_unique<dist::Group>(run.comm.split(static_cast<int>(run.data_rank), tensor_rank));
  run.tp_group->count_in_profile(dist::kTensorParallelChannel);  // --profile's tp_all_reduce rows
  run.data_comm = run.comm.split_communicator(tensor_rank, static_cast<int>(run.data_rank));
}

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

double tensor_parallel_grad_norm(const TrainRun& run) {
  std::vector<Variable> split, whole;
  for (const auto& [name, p] : run.model->named_parameters())
    (nn::tensor_split(name) == nn::TensorSplit::Whole ? whole : split).push_back(p);
  const double split_norm = optim::grad_norm(split), whole_norm = optim::grad_norm(whole);
  Tensor sq = Tensor::from_vector(std::vector<double>{split_norm * split_norm}, {1});
  run.tp_group->all_reduce_sum(sq);
  return std::sqrt(sq.to_vector<double>()[0] + whole_norm * whole_norm);
}

}  // namespace ember::apps
