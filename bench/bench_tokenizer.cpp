// Tokenizer figures: training time, encoding MB/s with 1 and 2 threads and
// bytes per token, on the Debian fortunes files by default ("%" lines part
// documents). bench/bench_tokenizer.sh sets them next to Hugging Face's.
//   bench_tokenizer [--vocab-size N] [--min-frequency N] [--save tokenizer.json]
//                   [--docs-out docs.json] [CORPUS...]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "core/io/atomic_file.h"
#include "data/tokenizer/bpe_trainer.h"

using namespace ember;

namespace {

// Best of `reps` runs: MB/s and token count of encoding all documents.
std::pair<double, uint64_t> encode_rate(const data::Tokenizer& tok, const std::vector<std::string>& docs,
                                        int threads, int reps) {
  uint64_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  double best = 1e30;
  uint64_t tokens = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<data::EncodeCache> caches(threads);  // fresh caches: every run starts cold
    uint64_t count = 0;
    const apps::Stopwatch watch;
#pragma omp parallel num_threads(threads) reduction(+ : count)
    {
      std::vector<uint32_t> ids;
      data::EncodeCache& cache = caches[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 64)
      for (size_t i = 0; i < docs.size(); ++i) {
        ids.clear();
        tok.encode(docs[i], ids, cache);
        count += ids.size();
      }
    }
    best = std::min(best, watch.seconds());
    tokens = count;
  }
  return {bytes / best / 1e6, tokens};
}

}  // namespace

int main(int argc, char** argv) {
  data::BpeTrainOptions options;
  options.vocab_size = 30000;  // the Hugging Face trainer's default
  options.min_frequency = 0;   // likewise
  std::string save_path, docs_path;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_tokenizer: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--vocab-size") options.vocab_size = std::stoul(value());
    else if (a == "--min-frequency") options.min_frequency = std::stoul(value());
    else if (a == "--save") save_path = value();
    else if (a == "--docs-out") docs_path = value();
    else inputs.push_back(a);
  }
  if (inputs.empty()) inputs.push_back("/usr/share/games/fortunes");
  try {
    data::CorpusOptions corpus;
    corpus.separator_line = "%";
    const auto files = data::list_corpus_files(inputs);
    std::vector<std::string> docs;
    uint64_t bytes = 0;
    {
      data::CorpusReader reader(files, corpus);
      data::TextBlock b;
      while (reader.next(b)) {
        bytes += b.text.size();
        docs.push_back(std::move(b.text));
      }
    }
    std::printf("corpus: %zu files, %zu documents, %.2f MB\n", files.size(), docs.size(), bytes / 1e6);
    if (!docs_path.empty()) write_file_atomically(docs_path, nlohmann::json(docs).dump());

    apps::Stopwatch watch;
    const data::WordCounts counts = data::count_corpus_words(files, corpus, options.special_tokens);
    const double t_count = watch.lap();
    const data::Tokenizer tok = data::train_bpe(counts.sorted(), options);
    const double t_merge = watch.lap();
    std::printf("train: vocab %zu (%zu merges), %zu distinct words: %.3f s (count %.3f s, merge %.3f s)\n",
                tok.vocab_size(), tok.model().merges().size(), counts.size(), t_count + t_merge,
                t_count, t_merge);
    if (!save_path.empty()) tok.save(save_path);
    for (int threads : {1, 2}) {
      const auto [rate, tokens] = encode_rate(tok, docs, threads, 3);
      std::printf("encode %d thread%s: %.1f MB/s, %llu tokens, %.3f bytes/token\n", threads,
                  threads > 1 ? "s" : "", rate, static_cast<unsigned long long>(tokens),
                  double(bytes) / tokens);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
}
