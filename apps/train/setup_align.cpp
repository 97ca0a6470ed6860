// `ember align`'s and `ember reward`'s data (docs/formats.md#preference-data-jsonl): the
// preference JSONL read and rendered with the base's tokenizer (pairs with a side without a
// scored token dropped, sides cut to T+1 ids, both counted), the kept pairs split into training
// and held-out ones (the seeded --val-fraction choice of fine-tuning), the loader of this rank's
// pairs; align's pair loss and its options; and --ref's vocabulary, which must be the policy's.
// Every rank reads the file itself.
#include <algorithm>

#include "apps/train/run.h"
#include "data/held_out.h"
#include "data/preference.h"
#include "nn/checkpoint_file.h"

namespace ember::apps {
namespace {

nn::PreferenceOptions preference_options(const TrainOptions& o) {
  nn::PreferenceOptions p = nn::preference_defaults(nn::parse_preference_loss(o.loss));
  p.beta = o.beta;
  p.label_smoothing = o.label_smoothing;
  p.simpo_gamma = o.simpo_gamma;
  p.sft_weight = o.sft_weight;
  nn::check_preference_options(p);
  return p;
}

// Chat pairs need <|im_start|> and <|im_end|>: an Error naming the base (and --add-chat-tokens).
void require_chat_tokens(const TrainRun& run, const std::vector<data::PreferenceLine>& lines) {
  if (std::all_of(lines.begin(), lines.end(), [](const data::PreferenceLine& l) { return l.is_text; }))
    return;
  try {
    data::chat_specials(*run.tokenizer);
  } catch (const Error& e) {
    throw Error(run.start_path + ": " + e.what());
  }
}

}  // namespace

void open_preference_data(TrainRun& run) {
  const TrainOptions& o = run.o;
  agreed(run.comm, [&] {
    if (o.align) run.preference = preference_options(o);
    const std::vector<data::PreferenceLine> lines = data::read_preference_file(o.data);
    require_chat_tokens(run, lines);
    const data::PreferencePairs rendered =
        data::make_preference_pairs(*run.tokenizer, lines, o.seq_len, o.data);
    run.dropped_pairs = static_cast<int64_t>(rendered.dropped_lines.size());
    run.cut_pairs = rendered.truncated;
    const int64_t n = static_cast<int64_t>(rendered.pairs.size());
    const std::vector<bool> held = data::held_out_items(n, o.val_fraction, o.seed);
    auto train = std::make_shared<std::vector<data::PreferencePair>>();
    auto val = std::make_shared<std::vector<data::PreferencePair>>();
    for (int64_t i = 0; i < n; ++i)
      (held[static_cast<size_t>(i)] ? *val : *train).push_back(rendered.pairs[static_cast<size_t>(i)]);
    EMBER_CHECK(!train->empty(), o.data, ": every one of its ", n,
                " kept pairs is held out by --val-fraction ", o.val_fraction,
                "; none is left to train on");
    run.held_out = static_cast<int64_t>(val->size());
    run.pairs = train;
    if (!val->empty()) run.val_pairs = val;
    run.pair_loader = std::make_unique<data::PairLoader>(
        run.pairs, data::BatchLoaderOptions{o.batch_size, o.seq_len, o.grad_accum, run.data_world,
                                            run.data_rank, o.sequential, o.seed});
  });
}

void check_reference_vocabulary(TrainRun& run) {
  const TrainOptions& o = run.o;
  if (o.ref.empty()) return;
  agreed(run.comm, [&] {
    const nn::ModelConfig ref = nn::read_checkpoint_config(o.ref);
    const int64_t policy = run.cfg.vocab_size + run.added_rows;
    EMBER_CHECK(ref.vocab_size == policy, "--ref ", o.ref, ": its vocabulary of ", ref.vocab_size,
                " tokens differs from the base's ", policy,
                " (the reference must score the same token ids)");
    const nn::Checkpoint c = read_base_without_weights(o.ref);
    EMBER_CHECK(c.tokenizer_json.empty() ||
                    data::Tokenizer::from_json(c.tokenizer_json).to_json() == run.tokenizer->to_json(),
                "--ref ", o.ref, ": its tokenizer differs from the base's",
                run.added_rows > 0 ? " (with the chat tokens --add-chat-tokens added)" : "",
                " (the reference must score the same token ids)");
  });
}

}  // namespace ember::apps
