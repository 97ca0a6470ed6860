// --tp and --pp: the refusals and the groups of a rank (see parallel_setup.h).
#include "apps/train/parallel_setup.h"

#include "dist/parallel_layout.h"
#include "nn/parallel_plan.h"

namespace ember::apps {
namespace {

std::string number(int64_t v) { return std::to_string(v); }

// ember finetune (align, reward) with --tp: what it does not combine with yet ("" when none).
std::string refused_with_finetune_tp(const TrainOptions& o) {
  if (!o.finetune) return "";
  if (o.align || o.reward)
    return std::string("--tp and ember ") + (o.align ? "align" : "reward") + " cannot be combined yet";
  if (o.zero) return "--tp and --zero cannot be combined yet in ember finetune (use --zero 0)";
  if (o.add_chat_tokens) return "--tp and --add-chat-tokens cannot be combined yet";
  return "";
}

// The options a layout does not combine with yet: "" when none.
std::string refused_with_tp(const TrainOptions& o) {
  if (o.tp == 1) return "";
  if (const std::string refused = refused_with_finetune_tp(o); !refused.empty()) return refused;
  if (o.zero >= 2) return "--tp and --zero " + number(o.zero) + " cannot be combined yet (use --zero 0 or 1)";
  if (o.sample_tokens > 0) return "--tp and --sample-tokens cannot be combined yet (sample with ember generate)";
  return "";
}

std::string refused_with_pp(const TrainOptions& o) {
  if (o.pp == 1) {
    for (const auto& [field, flag] : {std::pair{"micro_batches", "--micro-batches"}, std::pair{"pp_layers", "--pp-layers"},
                                      std::pair{"pp_schedule", "--pp-schedule"}}) {
      if (o.given.count(field)) return std::string(flag) + " needs --pp 2 or more";
    }
    return "";
  }
  if (o.align) return "--pp and ember align cannot be combined yet (use --pp 1)";
  if (o.reward) return "--pp and ember reward cannot be combined yet (use --pp 1)";
  if (o.finetune && o.add_chat_tokens)
    return "--pp and --add-chat-tokens cannot be combined yet (a base whose tokenizer has the chat tokens needs no "
           "--add-chat-tokens)";
  if (o.finetune && o.zero)
    return "--pp and --zero " + number(o.zero) + " cannot be combined yet in ember finetune (use --zero 0)";
  if (o.zero >= 2) return "--pp and --zero " + number(o.zero) + " cannot be combined yet (use --zero 0 or 1)";
  if (o.sample_tokens > 0) return "--pp and --sample-tokens cannot be combined yet (sample with ember generate)";
  const int64_t m = o.micro_batches > 0 ? o.micro_batches : o.pp;
  if (o.batch_size % m != 0)
    return "--batch-size " + number(o.batch_size) + " is not divisible by --micro-batches " + number(m) +
           (o.micro_batches > 0 ? "" : " (the default, --pp)");
  return "";
}

std::vector<int64_t> layer_counts(const TrainOptions& o) {
  return o.pp_layers.empty() ? std::vector<int64_t>{} : nn::parse_layer_counts(o.pp_layers);
}

}  // namespace

void setup_parallel_layout(TrainRun& run) {
  TrainOptions& o = run.o;
  if (o.tp == 1 && o.pp == 1) {
    agreed(run.comm, [&] {
      const std::string refused = refused_with_pp(o);
      EMBER_CHECK(refused.empty(), refused);
    });
    return;
  }
  nn::ParallelLayout plan;
  agreed(run.comm, [&] {
    EMBER_CHECK(run.world % (o.tp * o.pp) == 0, "--tp ", o.tp, " --pp ", o.pp,
                " needs a world size divisible by ", o.tp * o.pp, ", got ", run.world);
    for (const std::string& refused : {refused_with_tp(o), refused_with_pp(o)}) EMBER_CHECK(refused.empty(), refused);
    plan = nn::make_parallel_layout(run.cfg, o.tp, o.pp, layer_counts(o));
  });
  const dist::ParallelLayout layout(static_cast<int>(run.world), static_cast<int>(o.tp), static_cast<int>(o.pp));
  const int r = run.comm.rank(), T = layout.tp, D = layout.dp;
  const int t = layout.tensor_index(r), d = layout.data_index(r), s = layout.stage(r);
  if (o.tp > 1) {
    run.tp_group = std::make_unique<dist::Group>(run.comm.split(d + D * s, t));
    run.tp_group->count_in_profile(dist::kTensorParallelChannel);  // --profile's tp_all_reduce rows
  }
  if (o.pp > 1) {
    run.pp_group = std::make_unique<dist::Group>(run.comm.split(t + T * d, s));
    run.stage = nn::pipeline_stage(plan, s);
    if (o.micro_batches == 0) o.micro_batches = o.pp;
    run.pipeline = std::make_unique<dist::PipelineRunner>(
        *run.pp_group, dist::parse_schedule(o.pp_schedule), static_cast<int>(o.micro_batches),
        Shape{o.batch_size / o.micro_batches, o.seq_len, run.cfg.d_model}, DType::Float32);
  }
  run.data_comm = run.comm.split_communicator(t + T * s, d);
}

}  // namespace ember::apps
