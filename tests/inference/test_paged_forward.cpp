// InferenceModel::forward over a paged KV cache: logits against the training
// forward for several model configs (test_generation.cpp: against float64),
// batch invariance (alone, batched with 15 others, prompt split into chunks:
// bit-identical rows) with float32 and bfloat16 caches, scrambled block tables,
// a bfloat16 cache's logits near the float32 ones, and fine-tunes equal to
// their merged plain model.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "autograd/grad_mode.h"
#include "nn/adapters/adapters.h"
#include "inference/model_runner/paged_forward.h"
#include "nn/transformer.h"

using namespace ember;
using namespace ember::nn;
using namespace ember::inference;

namespace {

ModelConfig config_of(const std::string& extra) {
  return ModelConfig::from_json(R"({"vocab_size": 97, "d_model": 32, "n_layers": 2, "n_heads": 4,
      "max_seq_len": 96, "dropout": 0.0)" + extra + "}", "test config");
}

const std::vector<std::pair<std::string, std::string>> kConfigs = {
    {"dense MHA RoPE RMSNorm SwiGLU", R"(, "ffn_hidden": 48, "head_dim": 80)"},
    {"GQA qk_norm window softcaps parallel",
     R"(, "n_kv_heads": 2, "head_dim": 20, "qk_norm": true, "sliding_window": 7, "global_every": 2,
        "attn_softcap": 5.0, "final_softcap": 3.0, "parallel_block": true, "ffn_hidden": 40)"},
    {"learned LayerNorm GELU tied bias",
     R"(, "pos": "learned", "norm": "layernorm", "ffn_act": "gelu", "bias": true,
        "tie_embeddings": true)"},
    {"sinusoidal MQA untied gelu_tanh", R"(, "pos": "sinusoidal", "n_kv_heads": 1,
        "ffn_act": "gelu_tanh", "tie_embeddings": false)"},
    {"MoE top-2 shared expert", R"(, "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 24,
        "n_shared": 1}, "n_kv_heads": 2)"},
};

std::vector<int64_t> tokens_of(int64_t n, int64_t salt, int64_t vocab) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = (i * 31 + salt * 17 + (i * i) % 13) % vocab;
  return t;
}

// A sequence: its tokens and its block table.
struct Seq {
  std::vector<int64_t> tokens;
  std::vector<int32_t> table;
};

// Hands out blocks from a list (in its order).
struct Blocks {
  std::vector<int32_t> free;
  size_t next = 0;
  std::vector<int32_t> take(int64_t positions) {
    std::vector<int32_t> t;
    for (int64_t p = 0; p < positions; p += kKVBlockSize) t.push_back(free.at(next++));
    return t;
  }
};

using RowsOf = std::vector<std::vector<std::vector<float>>>;  // [seq][position][V]

// Runs all seqs together, each step giving every unfinished sequence its next `chunk`
// tokens (all logits). Returns every position's logits row per sequence.
RowsOf run(const InferenceModel& m, PagedKVStore& kv, const std::vector<Seq>& seqs, int64_t chunk) {
  const int64_t V = m.config().vocab_size;
  RowsOf out(seqs.size());
  std::vector<int64_t> done(seqs.size(), 0);
  for (;;) {
    std::vector<SeqChunk> chunks;
    std::vector<size_t> who;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(seqs[s].tokens.size()) - done[s]);
      if (n <= 0) continue;
      SeqChunk c;
      c.tokens = seqs[s].tokens.data() + done[s];
      c.n_tokens = n;
      c.pos0 = done[s];
      c.block_table = &seqs[s].table;
      c.all_logits = true;
      chunks.push_back(c);
      who.push_back(s);
    }
    if (chunks.empty()) return out;
    const Tensor logits = m.forward(chunks, kv);
    REQUIRE(logits.dim() == 2);
    REQUIRE(logits.size(1) == V);
    const float* p = logits.data<float>();
    for (size_t i = 0; i < chunks.size(); ++i) {
      for (int64_t t = 0; t < chunks[i].n_tokens; ++t, p += V) out[who[i]].emplace_back(p, p + V);
      done[who[i]] += chunks[i].n_tokens;
    }
  }
}

// max |a - b| <= rel * max |b| over the [T, V] rows of a and the flat b.
void check_close(const std::vector<std::vector<float>>& a, const Tensor& b, double rel) {
  const Tensor bc = b.contiguous();
  const float* pb = bc.data<float>();
  const int64_t V = b.size(-1);
  REQUIRE(static_cast<int64_t>(a.size()) * V == b.numel());
  double scale = 0, diff = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    for (int64_t v = 0; v < V; ++v) {
      const double ref = pb[static_cast<int64_t>(t) * V + v];
      scale = std::max(scale, std::abs(ref));
      diff = std::max(diff, std::abs(a[t][v] - ref));
    }
  }
  INFO("max diff " << diff << " scale " << scale);
  CHECK(diff <= rel * std::max(scale, 1e-3));
}

Tensor ids_tensor(const std::vector<int64_t>& t) {
  return Tensor::from_vector(t, {1, static_cast<int64_t>(t.size())});
}

Blocks identity_blocks(int64_t n) {
  Blocks b;
  b.free.resize(static_cast<size_t>(n));
  std::iota(b.free.begin(), b.free.end(), 0);
  return b;
}

}  // namespace

TEST_CASE("paged forward: logits match forward for every model kind, "
          "a bfloat16 cache within 5e-3",
          "[paged]") {
  for (const auto& [name, extra] : kConfigs) {
    SECTION(name) {
      const ModelConfig cfg = config_of(extra);
      const Transformer model(cfg, 11);
      const InferenceModel im(model);
      const std::vector<int64_t> toks = tokens_of(40, 1, cfg.vocab_size);
      NoGradGuard no_grad;
      const Tensor full = model.forward(ids_tensor(toks)).logits.data();
      PagedKVStore kv(cfg, 8);
      Blocks blocks = identity_blocks(8);
      const std::vector<Seq> seqs{{toks, blocks.take(40)}};
      const RowsOf rows = run(im, kv, seqs, 9);
      check_close(rows[0], full, 1e-4);
      PagedKVStore kv16(cfg, 8, DType::BFloat16);
      Blocks blocks16 = identity_blocks(8);
      // Keys and values carry 8 significant bits: about 6e-4 of the scale here.
      check_close(run(im, kv16, {{toks, blocks16.take(40)}}, 9)[0], full, 5e-3);
    }
  }
}

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Sequence 0 (53 tokens) with 15 others of lengths 1..60, each with its own blocks.
std::vector<Seq> sixteen(const ModelConfig& cfg, Blocks& blocks) {
  std::vector<Seq> seqs;
  for (int64_t s = 0; s < 16; ++s) {
    const int64_t n = s == 0 ? 53 : 1 + (s * 23) % 60;
    Seq q{tokens_of(n, s + 2, cfg.vocab_size), {}};
    q.table = blocks.take(n);
    seqs.push_back(std::move(q));
  }
  return seqs;
}

}  // namespace

TEST_CASE("paged forward: a sequence's logits are bit-identical alone, batched and chunked",
          "[paged]") {
  for (const size_t which : {size_t{0}, size_t{1}, size_t{4}}) {
    SECTION(kConfigs[which].first) {
      const ModelConfig cfg = config_of(kConfigs[which].second);
      const InferenceModel im(Transformer(cfg, 5));
      for (const DType kv_dtype : {DType::Float32, DType::BFloat16}) {
        INFO(dtype_name(kv_dtype) << " KV cache");
        PagedKVStore kv(cfg, 80, kv_dtype);
        Blocks blocks = identity_blocks(80);
        const std::vector<Seq> seqs = sixteen(cfg, blocks);
        const RowsOf alone = run(im, kv, {seqs[0]}, 1000);
        REQUIRE(alone[0].size() == 53);
        const auto expect_same = [&](const RowsOf& got, const char* what) {
          INFO(what);
          REQUIRE(got[0].size() == alone[0].size());
          for (size_t t = 0; t < got[0].size(); ++t) {
            INFO("position " << t);
            CHECK(same_bits(got[0][t], alone[0][t]));
          }
        };
        expect_same(run(im, kv, seqs, 1000), "batched with 15 others");
        expect_same(run(im, kv, seqs, 1), "16 sequences decoding one token a step");
        expect_same(run(im, kv, seqs, 7), "16 sequences in chunks of 7");
        const int threads = omp_get_max_threads();
        omp_set_num_threads(threads == 1 ? 2 : 1);
        expect_same(run(im, kv, seqs, 16), "other thread count");
        omp_set_num_threads(threads);
        for (const int64_t chunk : {1, 5, 16, 17}) {
          INFO("chunk " << chunk);
          expect_same(run(im, kv, {seqs[0]}, chunk), "alone, chunked");
        }
        // Blocks in a scrambled order, far apart.
        Seq scrambled{seqs[0].tokens, {}};
        for (int32_t b : {71, 3, 40, 77}) scrambled.table.push_back(b);
        expect_same(run(im, kv, {scrambled}, 16), "scrambled block table");
      }
    }
  }
}

TEST_CASE("paged forward: bf16 and int8 weights keep a sequence's logits bit-identical alone, batched "
          "and chunked",
          "[paged][weights]") {
  for (const size_t which : {size_t{0}, size_t{2}, size_t{4}}) {
    const ModelConfig cfg = config_of(kConfigs[which].second);
    const Transformer model(cfg, 5);
    for (const kernels::WeightType type : {kernels::WeightType::BFloat16, kernels::WeightType::Int8}) {
      INFO(kConfigs[which].first << ", " << kernels::weight_type_name(type) << " weights");
      const InferenceModel im(model, type);
      PagedKVStore kv(cfg, 80);
      Blocks blocks = identity_blocks(80);
      const std::vector<Seq> seqs = sixteen(cfg, blocks);
      const RowsOf alone = run(im, kv, {seqs[0]}, 1000);
      const auto expect_same = [&](const RowsOf& got, const char* what) {
        INFO(what);
        REQUIRE(got[0].size() == alone[0].size());
        for (size_t t = 0; t < got[0].size(); ++t) {
          INFO("position " << t);
          CHECK(same_bits(got[0][t], alone[0][t]));
        }
      };
      expect_same(run(im, kv, seqs, 1000), "batched with 15 others");
      expect_same(run(im, kv, seqs, 1), "16 sequences decoding one token a step");
      expect_same(run(im, kv, seqs, 7), "16 sequences in chunks of 7");
      const int threads = omp_get_max_threads();
      omp_set_num_threads(threads == 1 ? 2 : 1);
      expect_same(run(im, kv, seqs, 16), "other thread count");
      omp_set_num_threads(threads);
      expect_same(run(im, kv, {seqs[0]}, 17), "alone, chunks of 17");
      // The weights are the type's: logits differ from float32's, but only by its rounding.
      const InferenceModel f32(model);
      const RowsOf ref = run(f32, kv, {seqs[0]}, 1000);
      double diff = 0, scale = 0;
      for (size_t t = 0; t < ref[0].size(); ++t) {
        for (size_t v = 0; v < ref[0][t].size(); ++v) {
          diff = std::max(diff, std::abs(double{alone[0][t][v]} - ref[0][t][v]));
          scale = std::max(scale, std::abs(double{ref[0][t][v]}));
        }
      }
      CHECK(diff > 0);
      CHECK(diff < 0.05 * scale);
    }
  }
}

TEST_CASE("paged forward: last-token logits and threads", "[paged]") {
  const ModelConfig cfg = config_of(kConfigs[0].second);
  const InferenceModel im(Transformer(cfg, 2));
  PagedKVStore kv(cfg, 16);
  Blocks blocks = identity_blocks(16);
  const std::vector<Seq> seqs{{tokens_of(30, 3, cfg.vocab_size), blocks.take(30)},
                              {tokens_of(12, 4, cfg.vocab_size), blocks.take(12)}};
  const RowsOf all = run(im, kv, seqs, 100);
  std::vector<SeqChunk> chunks(2);
  for (size_t s = 0; s < 2; ++s) {
    chunks[s].tokens = seqs[s].tokens.data();
    chunks[s].n_tokens = static_cast<int64_t>(seqs[s].tokens.size());
    chunks[s].block_table = &seqs[s].table;
  }
  const Tensor last = im.forward(chunks, kv);
  REQUIRE(last.shape() == Shape({2, cfg.vocab_size}));
  const float* p = last.data<float>();
  CHECK(same_bits(std::vector<float>(p, p + cfg.vocab_size), all[0].back()));
  CHECK(same_bits(std::vector<float>(p + cfg.vocab_size, p + 2 * cfg.vocab_size), all[1].back()));
  CHECK(PagedKVStore::bytes_per_block(cfg) ==
        static_cast<size_t>(2 * 2 * 16 * cfg.n_kv_heads * cfg.head_dim * 4));
  CHECK(PagedKVStore::bytes_per_block(cfg, DType::BFloat16) * 2 == PagedKVStore::bytes_per_block(cfg));
  CHECK(PagedKVStore(cfg, 4, DType::BFloat16).dtype() == DType::BFloat16);
  CHECK_THROWS_WITH(PagedKVStore(cfg, 4, DType::Float64), Catch::Contains("float32 or bfloat16"));
}

TEST_CASE("paged forward: a fine-tune equals its merged plain model", "[paged]") {
  for (const bool moe : {false, true}) {
    SECTION(moe ? "moe" : "dense") {
      const ModelConfig cfg = config_of(moe ? kConfigs[4].second : kConfigs[0].second);
      Transformer model(cfg, 9);
      LoRAConfig lora;
      lora.r = 4;
      lora.targets = {"q", "k", "v", "o", "gate", "up", "down", "head"};
      add_adapters(model, lora, "none", 21);
      // B = 0 at init: give the adapters a visible effect.
      uint64_t seed = 100;
      for (auto& [name, p] : model.named_parameters()) {
        if (name.find("lora_B") == std::string::npos) continue;
        Tensor r = Tensor::randn(p.shape(), seed++);
        for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] *= 0.05f;
        p.data().copy_(r);
      }
      const InferenceModel im(model);
      const InferenceModel plain(merged_config(model.config()), merged_state_dict(model));
      const std::vector<int64_t> toks = tokens_of(37, 6, cfg.vocab_size);
      NoGradGuard no_grad;
      const Tensor ref = model.forward(ids_tensor(toks)).logits.data();
      PagedKVStore kv(cfg, 4);
      Blocks blocks = identity_blocks(4);
      const std::vector<Seq> seqs{{toks, blocks.take(37)}};
      const RowsOf a = run(im, kv, seqs, 10);
      const RowsOf b = run(plain, kv, seqs, 10);
      check_close(a[0], ref, 1e-4);
      for (size_t t = 0; t < a[0].size(); ++t) CHECK(same_bits(a[0][t], b[0][t]));
    }
  }
}

TEST_CASE("paged forward: bad chunks are errors", "[paged]") {
  const ModelConfig cfg = config_of(kConfigs[0].second);
  const InferenceModel im(Transformer(cfg, 2));
  PagedKVStore kv(cfg, 4);
  const std::vector<int64_t> toks = tokens_of(20, 1, cfg.vocab_size);
  const std::vector<int32_t> short_table{0}, bad_block{0, 9}, ok{2, 3};
  const auto chunk = [&](const std::vector<int32_t>& table, int64_t pos0) {
    SeqChunk c;
    c.tokens = toks.data();
    c.n_tokens = 20;
    c.pos0 = pos0;
    c.block_table = &table;
    return std::vector<SeqChunk>{c};
  };
  CHECK_THROWS_WITH(im.forward(chunk(short_table, 0), kv), Catch::Contains("too short"));
  CHECK_THROWS_WITH(im.forward(chunk(bad_block, 0), kv), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(im.forward(chunk(ok, cfg.max_seq_len - 5), kv), Catch::Contains("max_seq_len"));
  CHECK_THROWS(im.forward({}, kv));
  CHECK_NOTHROW(im.forward(chunk(ok, 0), kv));
}
