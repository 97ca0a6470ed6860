// `ember tokenize`: train a byte-level BPE tokenizer on a corpus
// (--train --vocab-size N CORPUS... --out tokenizer.json) and/or encode a
// corpus into llm.c token shards (--encode CORPUS... --tokenizer F --out DIR),
// with the tokenizer beside them as DIR/tokenizer.json.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "apps/cli/commands.h"
#include "apps/train/data_prep.h"
#include "apps/cli/output_file.h"
#include "data/tokenizer/bpe_trainer.h"
#include "data/corpus_encoder.h"

namespace ember::apps {
namespace {

struct TokenizeOptions {
  bool train = false, encode = false;
  std::vector<std::string> corpus;
  std::string tokenizer, out, separator;
  int64_t vocab_size = 8192, shard_tokens = 100'000'000;
  uint64_t min_frequency = 2;
  double val_fraction = 0.0;
};

// Progress on stderr: a redrawn bar on a terminal, plain lines otherwise.
data::ProgressFn progress_printer() {
  const bool terminal = isatty(fileno(stderr));
  auto last = std::make_shared<double>(-1.0);
  return [terminal, last](const data::Progress& p) {
    const bool finished = p.total > 0 && p.done >= p.total;
    if (!terminal && !finished && p.seconds - *last < 2.0) return;  // a line every 2 s
    *last = p.seconds;
    std::fprintf(stderr, terminal ? "\r%s" : "%s\n", data::format_progress(p, terminal).c_str());
    if (terminal && finished) std::fprintf(stderr, "\n");
  };
}

// Options checked before any work, each error naming its option.
void check_tokenize_options(const TokenizeOptions& o) {
  EMBER_CHECK(o.train || o.encode, "tokenize: give --train, --encode or both");
  EMBER_CHECK(!o.train || (o.vocab_size >= 259 && o.vocab_size <= INT32_MAX),
              "--vocab-size must be between 259 (the 256 bytes, <|endoftext|>, <|im_start|> and <|im_end|>) and "
              "2^31 - 1, got ", o.vocab_size);
  EMBER_CHECK(o.val_fraction >= 0 && o.val_fraction < 1, "--val-fraction must be in [0, 1), got ", o.val_fraction);
  EMBER_CHECK(o.shard_tokens >= 1 && o.shard_tokens <= INT32_MAX,
              "--shard-tokens must be between 1 and 2^31 - 1, got ", o.shard_tokens);
  std::error_code ec;
  if (o.encode) {
    EMBER_CHECK(!std::filesystem::exists(o.out, ec) || std::filesystem::is_directory(o.out, ec), "--out ", o.out,
                ": is a file; --encode writes shards into a folder");
  }
  const std::string tokenizer_out = o.encode ? o.tokenizer : o.out;
  EMBER_CHECK(!o.train || !std::filesystem::is_directory(tokenizer_out, ec), o.encode ? "--tokenizer " : "--out ",
              tokenizer_out, ": is a folder; give the tokenizer.json file to write");
  if (o.train) require_replaceable(o.encode ? "--tokenizer" : "--out", tokenizer_out, "a JSON", {"{"});
}

// --train: a tokenizer trained on the corpus and written out; otherwise the --tokenizer file.
data::Tokenizer train_or_load_tokenizer(const TokenizeOptions& o, const data::CorpusOptions& corpus) {
  if (!o.train) {
    EMBER_CHECK(!o.tokenizer.empty(), "tokenize --encode: give --tokenizer FILE");
    return data::Tokenizer::load(o.tokenizer);
  }
  data::BpeTrainOptions t;
  t.vocab_size = static_cast<size_t>(o.vocab_size);
  t.min_frequency = o.min_frequency;
  data::Tokenizer tok = data::train_bpe_on_corpus(o.corpus, t, corpus, progress_printer());
  const std::string path = o.encode ? o.tokenizer : o.out;
  EMBER_CHECK(!path.empty(), "tokenize: --train with --encode needs --tokenizer FILE to write the tokenizer to");
  tok.save(path);
  std::printf("wrote %s (%zu tokens)\n", path.c_str(), tok.vocab_size());
  return tok;
}

// --encode: the corpus as shards in --out, with the tokenizer beside them; prints a summary.
void encode_to_shards(const TokenizeOptions& o, const data::Tokenizer& tok, const data::CorpusOptions& corpus) {
  data::CorpusEncodeOptions e;
  e.out_dir = o.out;
  e.val_fraction = o.val_fraction;
  e.shard_tokens = static_cast<uint64_t>(o.shard_tokens);
  e.corpus = corpus;
  e.progress = progress_printer();
  const data::CorpusEncodeResult r = data::encode_corpus(tok, o.corpus, e);
  EMBER_CHECK(r.train_shards.size() + r.val_shards.size() > 0, "tokenize --encode: the corpus (",
              o.corpus.front(), o.corpus.size() > 1 ? ", ..." : "", ") holds no text; no shards written to ",
              o.out);
  // The shards' tokenizer beside them: `ember train --data OUT/train` stores it in its checkpoints.
  const std::string beside = (std::filesystem::path(o.out) / kShardTokenizerName).string();
  tok.save(beside);
  std::printf("encoded %llu documents (%.1f MB) into %llu train tokens (%zu shards) and %llu validation tokens "
              "in %.1f s: %.2f bytes per token\n",
              static_cast<unsigned long long>(r.documents), r.bytes / 1e6,
              static_cast<unsigned long long>(r.train_tokens), r.train_shards.size(),
              static_cast<unsigned long long>(r.val_tokens), r.seconds,
              static_cast<double>(r.bytes) / std::max<double>(1, static_cast<double>(r.train_tokens + r.val_tokens)));
  std::printf("wrote %s (the shards' tokenizer)\n", beside.c_str());
}

}  // namespace

CommandRunner add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "Train a byte-level BPE tokenizer and/or encode a corpus into token shards");
  sub->add_flag("--train", o->train, "train a tokenizer on CORPUS and write it to --out (or --tokenizer with --encode)");
  sub->add_flag("--encode", o->encode, "encode CORPUS into llm.c shards in the folder --out");
  sub->add_option("corpus", o->corpus, "text files, folders or globs")->required();
  sub->add_option("--vocab-size", o->vocab_size, "tokens in all: 256 bytes + merges + the special tokens <|endoftext|>, <|im_start|>, <|im_end|>")->capture_default_str();
  sub->add_option("--min-frequency", o->min_frequency, "a pair seen fewer times is never merged")->capture_default_str();
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json to encode with (written first with --train)");
  sub->add_option("--out", o->out, "tokenizer.json (--train) or the shard folder (--encode)")->required();
  sub->add_option("--val-fraction", o->val_fraction, "documents held out as validation shards")->capture_default_str();
  sub->add_option("--shard-tokens", o->shard_tokens, "tokens per shard")->capture_default_str();
  sub->add_option("--separator", o->separator, "a line equal to this ends a document (e.g. % for fortunes)");
  return [o]() {
    check_tokenize_options(*o);
    data::CorpusOptions corpus;
    corpus.separator_line = o->separator;
    const data::Tokenizer tok = train_or_load_tokenizer(*o, corpus);
    if (o->encode) encode_to_shards(*o, tok, corpus);
    return 0;
  };
}

}  // namespace ember::apps
