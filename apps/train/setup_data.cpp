// The run's tokenizer and data: a BPE tokenizer trained on the text corpus with
// --vocab-size (rank 0; the others receive it), else the one data_prep.h finds;
// text tokenised into OUT/data by rank 0, then every rank opens the shards and
// its loaders; and the notes of what --resume changed.
#include <cstdio>

#include "apps/train/run.h"
#include "autograd/autocast.h"
#include "data/tokenizer/bpe_trainer.h"

namespace ember::apps {

// --vocab-size: a BPE tokenizer trained here on the text corpus (rank 0; the
// others receive it); the model's vocabulary follows it.
void train_tokenizer_if_asked(TrainRun& run) {
  const TrainOptions& o = run.o;
  if (o.vocab_size <= 0 || !run.start_path.empty()) return;
  std::string tokenizer_json;
  agreed(run.comm, [&] {
    EMBER_CHECK(!is_shard_spec(o.data), "--vocab-size trains a tokenizer on text; --data ", o.data,
                " is token shards");
    data::BpeTrainOptions t;
    t.vocab_size = static_cast<size_t>(o.vocab_size);
    data::CorpusOptions corpus;
    corpus.separator_line = "%";
    if (run.root) tokenizer_json = data::train_bpe_on_corpus({o.data}, t, corpus).to_json();
  });
  run.comm.broadcast(tokenizer_json);
  run.trained_tokenizer = data::Tokenizer::from_json(tokenizer_json);
  nn::ModelConfig c = run.cfg;
  c.vocab_size = static_cast<int64_t>(run.trained_tokenizer->vocab_size());
  run.cfg = nn::ModelConfig::from_json(c.to_json(), "config with --vocab-size");
}

// --tokenizer, the checkpoint's, the one beside the shards, else the byte tokenizer when
// the vocabulary holds the bytes (data_prep.h); a model over token shards of its own
// vocabulary may have none.
void choose_tokenizer(TrainRun& run) {
  const TrainOptions& o = run.o;
  agreed(run.comm, [&] {
    if (!run.start_path.empty()) {
      EMBER_CHECK(
          run.cfg.to_json() == run.start.config.to_json(), run.start_path,
          ": the checkpoint's model config does not match the one given by --config/--preset");
    }
    run.autocast = parse_autocast_dtype(o.dtype);
    if (run.trained_tokenizer) {
      run.tokenizer = run.trained_tokenizer;
    } else {
      run.run_tokenizer =
          training_tokenizer(o.tokenizer, run.start.tokenizer_json, run.cfg, o.data);
      run.tokenizer = run.run_tokenizer.tokenizer;
    }
    if (!is_shard_spec(o.data)) {
      EMBER_CHECK(
          run.tokenizer && static_cast<int64_t>(run.tokenizer->vocab_size()) <= run.cfg.vocab_size,
          "--data: tokenising text needs a tokenizer that fits the model's vocab_size (",
          run.cfg.vocab_size, "); the byte tokenizer needs at least 256");
    }
  });
}

namespace {

// The validation loader: rank 0 evaluates alone, in batches of the global
// batch's rows (as one process would); none when the data is shorter than a row.
void open_validation(TrainRun& run, const std::string& spec) {
  const TrainOptions& o = run.o;
  auto val_set = std::make_shared<data::TokenDataset>(spec);
  EMBER_CHECK(static_cast<int64_t>(data::max_token_id(*val_set)) < run.cfg.vocab_size,
              "--val-data: a token id is outside the model's vocabulary");
  if (static_cast<int64_t>(val_set->size()) <= o.seq_len) return;
  const int64_t rows = run.data_world * o.batch_size;
  run.val_loader =
      std::make_unique<data::BatchLoader>(val_set, data::BatchLoaderOptions{rows, o.seq_len, 1, 1, 0, true, 0});
  run.eval_batches =
      std::min(o.eval_batches, std::max<int64_t>(1, run.val_loader->num_windows() / rows));
}

}  // namespace

// Text is tokenised into OUT/data by rank 0 alone; the others wait, then open the shards.
void open_data(TrainRun& run) {
  const TrainOptions& o = run.o;
  PreparedData data;
  agreed(run.comm, [&] {
    if (run.root)
      data = prepare_data(o.data, o.val_data, run.tokenizer ? *run.tokenizer : data::Tokenizer(), o.out,
                          o.val_fraction);
  });
  run.comm.broadcast(data.train);
  run.comm.broadcast(data.val);
  agreed(run.comm, [&] {
    run.train_set = std::make_shared<data::TokenDataset>(data.train);
    const uint32_t max_id = data::max_token_id(*run.train_set);
    EMBER_CHECK(static_cast<int64_t>(max_id) < run.cfg.vocab_size, "--data: token id ", max_id,
                " is outside the model's vocabulary (vocab_size ", run.cfg.vocab_size, ")");
    check_tokenizer_covers(run.run_tokenizer, max_id, o.data);
    run.loader = std::make_unique<data::BatchLoader>(
        run.train_set, data::BatchLoaderOptions{o.batch_size, o.seq_len, o.grad_accum, run.data_world,
                                          run.data_rank, o.sequential, o.seed});
    if (!data.val.empty()) open_validation(run, data.val);
  });
}

// What --resume changes, once the run has its folder and data (a refused run prints only its
// error).
void print_resume_notes(TrainRun& run) {
  if (run.root) {
    for (const std::string& note : run.resume_notes) std::printf("%s\n", note.c_str());
    std::fflush(stdout);
  }
  note_global_batch_change(run.comm, run.saved_world, run.saved_batch, run.data_world,
                           run.o.batch_size);
}

}  // namespace ember::apps
