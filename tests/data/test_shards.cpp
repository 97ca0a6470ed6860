// llm.c token shards: write and read back (uint16 and uint32), every bad
// header case with an error naming the file, datasets from a file, a folder
// or a glob in name order, and encoding a corpus into train/val shards.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "data/tokenizer/bpe_trainer.h"
#include "data/corpus_encoder.h"
#include "data/token_shard.h"
#include "temp_dir.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;
using testing::read_text;

std::vector<int32_t> read_header(const std::string& path) {
  std::vector<int32_t> h(256);
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(h.data()), 1024);
  return h;
}

// Writes a file: a header with the given fields, then body_bytes bytes.
void write_raw(const std::string& path, int32_t magic, int32_t version, int32_t count,
               size_t body_bytes) {
  std::vector<int32_t> h(256, 0);
  h[0] = magic;
  h[1] = version;
  h[2] = count;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(h.data()), 1024);
  out << std::string(body_bytes, '\x01');
}

std::vector<uint32_t> all_tokens(const data::TokenDataset& d) {
  std::vector<uint32_t> out(d.size());
  d.read(0, out.size(), out.data());
  return out;
}

}  // namespace

TEST_CASE("shards round trip as uint16 or uint32", "[shards]") {
  TempDir dir("shards");
  const std::vector<uint32_t> small = {0, 1, 50256, 65535, 7};
  data::write_shard(dir / "a.bin", small, 65536);
  auto h = read_header(dir / "a.bin");
  CHECK(h[0] == 20240520);
  CHECK(h[1] == 1);
  CHECK(h[2] == 5);
  CHECK(fs::file_size(dir / "a.bin") == 1024 + 5 * 2);
  data::TokenShard a(dir / "a.bin");
  CHECK(a.size() == 5);
  CHECK(a.token_bytes() == 2);
  CHECK(a[2] == 50256);
  std::vector<int64_t> got(5);
  a.read(0, 5, got.data());
  CHECK(got == std::vector<int64_t>{0, 1, 50256, 65535, 7});

  const std::vector<uint32_t> big = {70000, 3, 99999};
  data::write_shard(dir / "b.bin", big, 100000);
  h = read_header(dir / "b.bin");
  CHECK(h[1] == 2);
  CHECK(fs::file_size(dir / "b.bin") == 1024 + 3 * 4);
  data::TokenShard b(dir / "b.bin");
  CHECK(b.token_bytes() == 4);
  CHECK(b[0] == 70000);
  CHECK(data::shard_token_bytes(65536) == 2);
  CHECK(data::shard_token_bytes(65537) == 4);

  data::write_shard(dir / "empty.bin", {}, 256);
  CHECK(data::TokenShard(dir / "empty.bin").size() == 0);
}

TEST_CASE("the shard writer checks ids and leaves no partial file", "[shards]") {
  TempDir dir("shards");
  {
    data::ShardWriter w(dir / "x.bin", 300);
    REQUIRE_THROWS_WITH(w.write(std::vector<uint32_t>{1, 300}),
                        Catch::Contains("token id 300") && Catch::Contains("x.bin"));
  }  // destroyed without close()
  CHECK_FALSE(fs::exists(dir / "x.bin"));
  CHECK_FALSE(fs::exists(dir / "x.bin.tmp"));
  data::ShardWriter w(dir / "y.bin", 300);
  w.write(std::vector<uint32_t>{1, 2});
  w.write(std::vector<uint32_t>{3});
  CHECK_FALSE(fs::exists(dir / "y.bin"));
  w.close();
  CHECK(data::TokenShard(dir / "y.bin").size() == 3);
}

TEST_CASE("bad shard files give errors naming the file", "[shards]") {
  TempDir dir("shards");
  write_raw(dir / "magic.bin", 12345, 1, 4, 8);
  REQUIRE_THROWS_WITH(data::TokenShard(dir / "magic.bin"),
                      Catch::Contains("magic.bin") && Catch::Contains("wrong magic number 12345"));
  write_raw(dir / "version.bin", 20240520, 3, 4, 8);
  REQUIRE_THROWS_WITH(data::TokenShard(dir / "version.bin"),
                      Catch::Contains("version.bin") && Catch::Contains("unsupported version 3"));
  write_raw(dir / "short.bin", 20240520, 1, 10, 8);
  REQUIRE_THROWS_WITH(data::TokenShard(dir / "short.bin"),
                      Catch::Contains("short.bin") && Catch::Contains("10 tokens") &&
                          Catch::Contains("truncated"));
  write_raw(dir / "long.bin", 20240520, 2, 1, 8);
  REQUIRE_THROWS_WITH(data::TokenShard(dir / "long.bin"),
                      Catch::Contains("long.bin") && Catch::Contains("holds 8 bytes"));
  write_raw(dir / "negative.bin", 20240520, 1, -1, 0);
  REQUIRE_THROWS_WITH(data::TokenShard(dir / "negative.bin"), Catch::Contains("negative token count"));
  std::ofstream(dir / "tiny.bin") << "not a shard";
  REQUIRE_THROWS_WITH(data::TokenShard(dir / "tiny.bin"),
                      Catch::Contains("tiny.bin") && Catch::Contains("truncated"));
  REQUIRE_THROWS_WITH(data::TokenShard(dir / "missing.bin"), Catch::Contains("missing.bin"));
  REQUIRE_THROWS_WITH(data::TokenDataset(dir / "nothing_*.bin"), Catch::Contains("nothing_*.bin"));
}

TEST_CASE("a dataset is a file, a folder or a glob, in name order", "[shards]") {
  TempDir dir("shards");
  fs::create_directories(dir.path / "set");
  data::write_shard((dir.path / "set" / "s_000002.bin").string(), std::vector<uint32_t>{6, 7}, 256);
  data::write_shard((dir.path / "set" / "s_000000.bin").string(), std::vector<uint32_t>{1, 2, 3}, 256);
  data::write_shard((dir.path / "set" / "s_000001.bin").string(), std::vector<uint32_t>{4, 5}, 256);
  std::ofstream(dir.path / "set" / "notes.txt") << "ignored";
  const data::TokenDataset folder((dir.path / "set").string());
  CHECK(folder.num_shards() == 3);
  CHECK(folder.size() == 7);
  CHECK(all_tokens(folder) == std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7});
  std::vector<int32_t> window(4);
  folder.read(2, 4, window.data());  // spans three shards
  CHECK(window == std::vector<int32_t>{3, 4, 5, 6});
  REQUIRE_THROWS_WITH(folder.read(5, 3, window.data()), Catch::Contains("[5, 8) of 7"));
  CHECK(data::TokenDataset((dir.path / "set" / "s_00000[12].bin").string()).size() == 4);
  CHECK(data::TokenDataset((dir.path / "set" / "s_000001.bin").string()).size() == 2);
  fs::create_directories(dir.path / "empty");
  REQUIRE_THROWS_WITH(data::TokenDataset((dir.path / "empty").string()), Catch::Contains("no .bin"));
}

TEST_CASE("encoding a corpus writes train and val shards", "[shards][tokenizer]") {
  TempDir dir("shards");
  fs::create_directories(dir.path / "corpus");
  std::vector<std::string> docs;
  std::mt19937 rng(1);
  for (int f = 0; f < 3; ++f) {
    std::ofstream out(dir.path / "corpus" / ("part" + std::to_string(f) + ".txt"));
    for (int d = 0; d < 40; ++d) {
      std::string doc = "Document " + std::to_string(f * 40 + d) + ":";
      for (int w = 0; w < 1 + static_cast<int>(rng() % 60); ++w) doc += " word" + std::to_string(rng() % 50);
      doc += ".\n";
      docs.push_back(doc);
      out << doc << "%\n";
    }
  }
  data::BpeTrainOptions to;
  to.vocab_size = 400;
  const data::Tokenizer tok = data::train_bpe_on_corpus({(dir.path / "corpus").string()}, to);
  data::CorpusEncodeOptions o;
  o.out_dir = dir / "out";
  o.val_fraction = 0.25;
  o.shard_tokens = 500;
  o.corpus.separator_line = "%";
  o.threads = 2;
  int calls = 0;
  o.progress = [&](const data::Progress& p) {
    ++calls;
    CHECK(p.stage == "encoding");
  };
  const data::CorpusEncodeResult r = data::encode_corpus(tok, {(dir.path / "corpus").string()}, o);
  CHECK(calls > 0);
  CHECK(r.documents == 120);
  CHECK(r.val_documents == 30);
  const data::TokenDataset train((dir.path / "out" / "train").string());
  const data::TokenDataset val((dir.path / "out" / "val").string());
  CHECK(train.size() == r.train_tokens);
  CHECK(val.size() == r.val_tokens);
  for (size_t i = 0; i + 1 < train.num_shards(); ++i) CHECK(train.shard(i).size() == 500);
  CHECK(fs::path(r.train_shards[0]).filename() == "train_000000.bin");
  // Every document, preceded by <|endoftext|>, lands in its split in order.
  std::string want_train, want_val;
  for (size_t i = 0; i < docs.size(); ++i)
    (data::is_val_document(i, 0.25) ? want_val : want_train) += "<|endoftext|>" + docs[i];
  CHECK(tok.decode(all_tokens(train)) == want_train);
  CHECK(tok.decode(all_tokens(val)) == want_val);
  // The thread count changes nothing.
  o.out_dir = dir / "out1";
  o.threads = 1;
  o.progress = {};
  data::encode_corpus(tok, {(dir.path / "corpus").string()}, o);
  CHECK(all_tokens(data::TokenDataset((dir.path / "out1" / "train").string())) == all_tokens(train));
  // A tokenizer without <|endoftext|> cannot separate documents.
  REQUIRE_THROWS_WITH(data::encode_corpus(data::Tokenizer(), {(dir.path / "corpus").string()}, o),
                      Catch::Contains("<|endoftext|>"));
}
