// `ember finetune`'s data (docs/formats.md#chat-data-jsonl): the base's tokenizer, the chat JSONL
// read and split into training and held-out conversations (a seeded choice of
// floor(n x --val-fraction) lines, the same for every world size; no validation when they hold
// no trained token within T+1 ids; training conversations without one are refused), each
// rendered to one row of at most T+1 ids, and the loader of this rank's rows. Every rank reads
// the file itself.
#include <algorithm>
#include <cstdio>

#include "apps/train/run.h"
#include "autograd/autocast.h"
#include "data/held_out.h"

namespace ember::apps {
namespace {

int64_t trained_targets(const data::ChatRows& rows) {
  int64_t n = 0;
  for (const data::ChatTokens& r : rows.rows) {
    for (size_t t = 1; t < r.trained.size(); ++t)
      n += r.trained[t] != 0;  // the targets are ids 1..
  }
  return n;
}

// Conversations need <|im_start|> and <|im_end|>: an Error naming the base (and --add-chat-tokens).
void require_chat_tokens(const TrainRun& run, const std::vector<data::ChatLine>& lines) {
  if (std::all_of(lines.begin(), lines.end(), [](const data::ChatLine& l) { return l.is_text; }))
    return;
  try {
    data::chat_specials(*run.tokenizer);
  } catch (const Error& e) {
    throw Error(run.start_path + ": " + e.what());
  }
}

// A training split without a trained token would run every step at loss 0 and save weights it
// never changed: refused, naming the file and why (no assistant message, or every answer past
// the cut to T+1 ids).
void require_trained_tokens(const TrainRun& run, const std::vector<data::ChatLine>& train) {
  if (trained_targets(*run.chat_rows) > 0) return;
  const TrainOptions& o = run.o;
  const auto count = [](size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  const size_t texts = static_cast<size_t>(
      std::count_if(train.begin(), train.end(), [](const data::ChatLine& l) { return l.is_text; }));
  const std::string which = detail::concat(
      count(train.size(), "training line", "training lines"),
      run.held_out > 0 ? " (" + std::to_string(run.held_out) + " more held out by --val-fraction)" : "");
  const bool answered = std::any_of(train.begin(), train.end(), [](const data::ChatLine& l) {
    return std::any_of(l.messages.begin(), l.messages.end(),
                       [](const data::ChatMessage& m) { return m.role == "assistant"; });
  });
  EMBER_CHECK(answered, "no tokens to train on in ", o.data, ": ", which, ", ",
              count(train.size() - texts, "conversation", "conversations"), " without an assistant message",
              texts > 0 ? " and " + count(texts, "{\"text\"} line", "{\"text\"} lines") + " of at most one token" : "",
              " (only assistant answers and {\"text\"} lines are trained)");
  throw Error(detail::concat("no tokens to train on in ", o.data, ": ", which,
                             ", every assistant answer begins beyond --seq-len + 1 = ", o.seq_len + 1,
                             " tokens (a larger --seq-len, at most the base's max_seq_len ",
                             run.cfg.max_seq_len, ", or shorter prompts)"));
}

}  // namespace

void choose_chat_tokenizer(TrainRun& run) {
  const TrainOptions& o = run.o;
  agreed(run.comm, [&] {
    run.autocast = parse_autocast_dtype(o.dtype);
    EMBER_CHECK(!o.resume.empty() || !run.start.config.lora, run.start_path,
                ": is a fine-tune checkpoint (LoRA adapters); fine-tune the merged model instead "
                "(ember export --merge --format ember)");
    EMBER_CHECK(!run.start.tokenizer_json.empty(), run.start_path,
                ": has no tokenizer (/tokenizer); chat data is text, so fine-tuning needs the "
                "tokenizer the model was trained with");
    run.tokenizer = data::Tokenizer::from_json(run.start.tokenizer_json);
    const int64_t vocab = static_cast<int64_t>(run.tokenizer->vocab_size());
    EMBER_CHECK(vocab <= run.cfg.vocab_size, run.start_path, ": its tokenizer has ", vocab,
                " tokens, more than the model's vocab_size ", run.cfg.vocab_size);
    if (o.add_chat_tokens && o.resume.empty()) {  // a resumed run's tokenizer has them
      run.tokenizer = run.tokenizer->with_chat_tokens();
      const int64_t grown = static_cast<int64_t>(run.tokenizer->vocab_size());
      run.added_rows = std::max<int64_t>(0, grown - run.cfg.vocab_size);
    }
  });
}

void open_chat_data(TrainRun& run) {
  const TrainOptions& o = run.o;
  agreed(run.comm, [&] {
    const std::vector<data::ChatLine> lines = data::read_chat_file(o.data);
    const int64_t n = static_cast<int64_t>(lines.size());
    const std::vector<bool> held = data::held_out_items(n, o.val_fraction, o.seed);
    std::vector<data::ChatLine> train, val;
    for (int64_t i = 0; i < n; ++i)
      (held[static_cast<size_t>(i)] ? val : train).push_back(lines[static_cast<size_t>(i)]);
    run.held_out = static_cast<int64_t>(val.size());
    require_chat_tokens(run, lines);
    run.chat_rows =
        std::make_shared<data::ChatRows>(data::make_chat_rows(*run.tokenizer, train, o.seq_len));
    require_trained_tokens(run, train);
    if (!val.empty()) {
      run.chat_val_rows =
          std::make_shared<data::ChatRows>(data::make_chat_rows(*run.tokenizer, val, o.seq_len));
    }
    if (run.chat_val_rows && trained_targets(*run.chat_val_rows) == 0)
      run.chat_val_rows.reset();  // nothing to score
    run.chat_loader = std::make_unique<data::ChatLoader>(
        run.chat_rows, data::BatchLoaderOptions{o.batch_size, o.seq_len, o.grad_accum, run.data_world,
                                                run.data_rank, o.sequential, o.seed});
  });
}

}  // namespace ember::apps
