// The reference log-probabilities of an `ember align` run (docs/model.md#log-probabilities-of-a-side):
// for every training and held-out pair, each side's sum of log softmax(z_{t-1})[x_t] over its
// scored tokens under the reference model (--ref's, else the starting model: for LoRA/QLoRA the
// base with its adapters switched off, no second copy), computed once before the first step in
// batches of --batch-size pairs (each in halves, as training reads them), in eval mode (no
// dropout) and without a graph, each rank a share of the batches. Rank 0 keeps them with the run
// in OUT/ref_logps.json (written atomically), so --resume reads them back instead of recomputing
// them. simpo and orpo read none.
#include <filesystem>

#include "apps/common/model_io.h"
#include "apps/train/run.h"
#include "apps/train/run_paths.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/io/atomic_file.h"
#include "core/io/read_file.h"
#include "nn/adapters/lora.h"
#include "nn/alignment/sequence_logprobs.h"

namespace ember::apps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFileName = "ref_logps.json";

// [chosen, rejected] of each pair under model. This rank scores the batches start = B (r + k W);
// the sum over ranks fills in the others' (each value comes from one rank, the others add 0).
std::vector<double> side_logps(TrainRun& run, nn::Transformer& model,
                               const std::vector<data::PreferencePair>& pairs) {
  const int64_t B = run.o.batch_size, T = run.o.seq_len, n = static_cast<int64_t>(pairs.size());
  std::vector<double> out(static_cast<size_t>(2 * n), 0.0);
  {
    NoGradGuard no_grad;
    AutocastGuard mixed(run.autocast);
    const bool training = model.is_training();
    model.eval();
    for (int64_t start = B * run.comm.rank(); start < n; start += B * run.world) {
      std::vector<int64_t> index;
      for (int64_t i = start; i < std::min(start + B, n); ++i) index.push_back(i);
      for (const data::PairBatch& b : data::pair_halves(pairs, index, T)) {  // as training's rows
        const Tensor x = b.tokens.narrow(1, 0, T).contiguous(), y = b.tokens.narrow(1, 1, T).contiguous();
        const nn::SequenceLogprobs s = nn::sequence_logprobs(model.forward(x).logits, y, b.scored);
        const std::vector<double> v = s.logp.data().to(DType::Float64).to_vector<double>();
        const size_t k = b.pairs.size();
        for (size_t i = 0; i < k; ++i) {
          out[static_cast<size_t>(2 * b.pairs[i])] = v[i];
          out[static_cast<size_t>(2 * b.pairs[i] + 1)] = v[k + i];
        }
      }
    }
    model.train(training);
  }
  if (run.world > 1) out = run.comm.all_reduce(std::move(out), dist::ReduceOp::Sum);
  return out;
}

// The reference's log-probabilities of the training and held-out pairs.
void compute(TrainRun& run) {
  // ZeRO-3: every parameter resident while the ranks score different batches (collective).
  const HeldParameters held(run.optimization);
  const std::vector<data::PreferencePair> none;
  const auto score = [&](nn::Transformer& model) {
    run.ref_logps = side_logps(run, model, *run.pairs);
    run.val_ref_logps = side_logps(run, model, run.val_pairs ? *run.val_pairs : none);
  };
  if (!run.o.ref.empty()) {
    LoadedModel ref = load_model(run.o.ref);  // freed when scored
    score(*ref.model);
  } else if (run.cfg.lora) {
    const nn::AdaptersOffGuard base_only;
    score(*run.model);
  } else {
    score(*run.model);  // a new --full run: the model before its first step
  }
}

std::string describe_reference(const TrainOptions& o) {
  return o.ref.empty() ? "the starting model" : o.ref;
}

void write(const TrainRun& run, const std::string& folder) {
  const json j = {{"reference", describe_reference(run.o)},
                  {"pairs", run.pairs->size()},
                  {"held_out", run.val_pairs ? run.val_pairs->size() : 0},
                  {"train", run.ref_logps},
                  {"val", run.val_ref_logps}};
  write_file_atomically((fs::path(folder) / kFileName).string(), j.dump());
}

// --resume: the values the run computed, for the same pairs.
void read_back(TrainRun& run) {
  const std::string path = (fs::path(run.o.resume) / kFileName).string();
  EMBER_CHECK(fs::exists(path), "--resume: ", path,
              ": missing; the reference log-probabilities of the run are kept there (start a new "
              "run with --base)");
  const json j = json::parse(read_file(path, "reference log-probabilities"), nullptr, false);
  const size_t val = run.val_pairs ? run.val_pairs->size() : 0;
  EMBER_CHECK(j.is_object() && j.value("pairs", size_t{0}) == run.pairs->size() &&
                  j.value("held_out", size_t{0}) == val && j.contains("train") &&
                  j.at("train").size() == 2 * run.pairs->size() && j.contains("val") &&
                  j.at("val").size() == 2 * val,
              "--resume: ", path, ": does not hold the reference log-probabilities of the run's ",
              run.pairs->size(), " training and ", val, " held-out pairs (start a new run with --base)");
  j.at("train").get_to(run.ref_logps);
  j.at("val").get_to(run.val_ref_logps);
}

}  // namespace

void prepare_reference_logps(TrainRun& run) {
  const nn::PreferenceLossKind loss = run.preference.loss;
  if (loss != nn::PreferenceLossKind::Dpo && loss != nn::PreferenceLossKind::Ipo) return;
  agreed(run.comm, [&] {
    if (!run.o.resume.empty()) read_back(run);
  });
  if (run.o.resume.empty()) compute(run);
  agreed(run.comm, [&] {
    const bool elsewhere = !run.o.resume.empty() && !same_path(run.o.resume, run.o.out);
    if (run.root && (run.o.resume.empty() || elsewhere)) write(run, run.o.out);
  });
}

}  // namespace ember::apps
