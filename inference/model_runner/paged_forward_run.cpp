// InferenceModel::forward (inference/model_runner/paged_forward.h): per layer, norm -> q, k, v
// (matmul_rows) -> qk_norm, RoPE -> K, V written into their slots -> one
// query at a time attention over the block table -> o_proj, then the MLP
// (dense FFN or MoE top-k with shared experts), then the head on the rows that
// need logits. Every step is row-wise: a row never sees the rest of the batch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <omp.h>

#include "core/kernels/bf16.h"
#include "inference/model_runner/paged_forward.h"
#include "inference/model_runner/paged_kernels.h"

namespace ember::inference {
namespace {

// The rows of one forward: token ids, positions, and the chunk of each row.
struct Rows {
  int64_t R = 0;
  std::vector<int64_t> token, pos, chunk;
};

// The float32 tensors (norms, biases, tables) and the Linears' packed weights of the model.
struct Weights {
  const std::map<std::string, Tensor>& t;
  const std::map<std::string, kernels::PackedWeight>& packed;
};

// Buffers of the forward, kept between calls on a thread (grow-only, never zeroed), so a
// decode step neither allocates nor faults in fresh pages.
enum Buf { kX, kH, kAtt, kO, kM, kQ, kK, kV, kUp, kGate, kAct, kSel, kHead, kNBufs };
float* scratch(Buf b, int64_t n) {
  thread_local std::vector<float> bufs[kNBufs];
  std::vector<float>& v = bufs[b];
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

const float* weight(const Weights& w, const std::string& name) {
  const auto it = w.t.find(name);
  EMBER_CHECK(it != w.t.end(), "InferenceModel: the weights lack ", name);
  return it->second.data<float>();
}
const float* maybe(const Weights& w, const std::string& name) {
  const auto it = w.t.find(name);
  return it == w.t.end() ? nullptr : it->second.data<float>();
}
const kernels::PackedWeight& linear_weight(const Weights& w, const std::string& name) {
  const auto it = w.packed.find(name);
  EMBER_CHECK(it != w.packed.end(), "InferenceModel: the weights lack ", name);
  return it->second;
}
int64_t rows_of(const Weights& w, const std::string& name) { return linear_weight(w, name).rows(); }

// out [R, N] = in [R, K] W^T (+ b) for the Linear `prefix`.
void linear(const Weights& w, const std::string& prefix, const float* in, int64_t R, int64_t K,
            float* out) {
  const kernels::PackedWeight& W = linear_weight(w, prefix + ".weight");
  EMBER_CHECK(W.cols() == K, "InferenceModel: ", prefix, " takes ", W.cols(), " inputs, not ", K);
  W.matmul(R, in, K, maybe(w, prefix + ".bias"), out, W.rows());
}

// outs[i] [R, N_i] = in [R, K] W_i^T (+ b_i) for the Linears `prefixes` of one input, in one
// parallel region (one fork-join instead of one each): every thread computes its share of each
// output's columns, and matmul_rows gives the same bits however the columns are split.
void linears(const Weights& w, const std::vector<std::string>& prefixes, const float* in, int64_t R,
             int64_t K, const std::vector<float*>& outs) {
  struct One {
    const kernels::PackedWeight* w;
    const float* b;
    int64_t N;
    float* y;
  };
  std::vector<One> ls;
  int64_t work = 0;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const kernels::PackedWeight& W = linear_weight(w, prefixes[i] + ".weight");
    EMBER_CHECK(W.cols() == K, "InferenceModel: ", prefixes[i], " takes ", W.cols(), " inputs, not ", K);
    ls.push_back({&W, maybe(w, prefixes[i] + ".bias"), W.rows(), outs[i]});
    work += W.rows() * K * std::min<int64_t>(R, 8);
  }
#pragma omp parallel if (work >= (int64_t{1} << 17))
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    for (const One& l : ls) {
      const int64_t n0 = l.N * t / threads, n1 = l.N * (t + 1) / threads;
      l.w->matmul(R, in, K, l.b, l.y, l.N, n0, n1);
    }
  }
}

void norm(const Weights& w, const nn::ModelConfig& cfg, const std::string& prefix, float* in, int64_t R,
          int64_t C, float* out) {
  paged::norm_rows(cfg.norm, in, R, C, C, weight(w, prefix + ".weight"), maybe(w, prefix + ".bias"),
                   cfg.norm_eps, out, C);
}

// out [R, C] = down(act(gate(in), up(in))) of the FFN `prefix`.
void ffn(const Weights& w, const nn::ModelConfig& cfg, const std::string& prefix, const float* in,
         int64_t R, float* out) {
  const int64_t C = cfg.d_model, H = rows_of(w, prefix + ".up_proj.weight");
  float* up = scratch(kUp, R * H);
  float* gate = cfg.gated_ffn() ? scratch(kGate, R * H) : nullptr;
  float* act = scratch(kAct, R * H);
  if (gate) {
    linears(w, {prefix + ".up_proj", prefix + ".gate_proj"}, in, R, C, {up, gate});
  } else {
    linear(w, prefix + ".up_proj", in, R, C, up);
  }
  paged::activate(cfg.ffn_act, gate, up, act, R * H);
  linear(w, prefix + ".down_proj", act, R, H, out);
}

// MoE of nn/moe.cpp at inference: p = softmax(router(x)), the top-k p (ties: lower index),
// renormalised when norm_topk_prob, weight their experts' outputs (summed in pick order);
// shared experts added after.
void moe(const Weights& w, const nn::ModelConfig& cfg, const std::string& prefix, const float* in,
         int64_t R, float* out) {
  const int64_t C = cfg.d_model, E = cfg.moe->n_experts, K = cfg.moe->top_k;
  std::vector<float> logits(static_cast<size_t>(R * E));
  linear(w, prefix + ".gate", in, R, C, logits.data());
  std::vector<int64_t> pick(static_cast<size_t>(R * K));
  std::vector<double> pw(static_cast<size_t>(R * K));
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(E));  // slots r * K + s
  for (int64_t r = 0; r < R; ++r) {
    const float* l = logits.data() + r * E;
    const double mx = *std::max_element(l, l + E);
    std::vector<double> p(static_cast<size_t>(E));
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - mx));
    std::vector<int64_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double top = 0;
    for (int64_t s = 0; s < K; ++s) top += p[order[s]] / sum;
    for (int64_t s = 0; s < K; ++s) {
      pick[r * K + s] = order[s];
      pw[r * K + s] = cfg.moe->norm_topk_prob ? (p[order[s]] / sum) / top : p[order[s]] / sum;
      members[order[s]].push_back(r * K + s);
    }
  }
  std::vector<float> slot_out(static_cast<size_t>(R * K * C));
  for (int64_t e = 0; e < E; ++e) {
    const auto& m = members[e];
    if (m.empty()) continue;
    const int64_t n = static_cast<int64_t>(m.size());
    std::vector<float> xs(static_cast<size_t>(n * C)), ys(static_cast<size_t>(n * C));
    for (int64_t i = 0; i < n; ++i) std::memcpy(&xs[i * C], in + (m[i] / K) * C, C * sizeof(float));
    ffn(w, cfg, prefix + ".experts." + std::to_string(e), xs.data(), n, ys.data());
    for (int64_t i = 0; i < n; ++i) std::memcpy(&slot_out[m[i] * C], &ys[i * C], C * sizeof(float));
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      float acc = 0;
      for (int64_t s = 0; s < K; ++s) acc += static_cast<float>(pw[r * K + s]) * slot_out[(r * K + s) * C + c];
      out[r * C + c] = acc;
    }
  }
  std::vector<float> sh(static_cast<size_t>(R * C));
  for (int64_t s = 0; s < cfg.moe->n_shared; ++s) {
    ffn(w, cfg, prefix + ".shared_experts." + std::to_string(s), in, R, sh.data());
    for (int64_t i = 0; i < R * C; ++i) out[i] += sh[i];
  }
}

void mlp(const Weights& w, const nn::ModelConfig& cfg, int64_t layer, const float* in, int64_t R,
         float* out) {
  const std::string prefix = "model.layers." + std::to_string(layer) + ".mlp";
  if (cfg.layer_is_moe(layer)) {
    moe(w, cfg, prefix, in, R, out);
  } else {
    ffn(w, cfg, prefix, in, R, out);
  }
}

// out [R, Hq * D] = attention of layer `layer` for the normed input h [R, C].
void attention(const Weights& w, const nn::ModelConfig& cfg, int64_t layer, const float* h,
               const Rows& rows, const std::vector<SeqChunk>& chunks, PagedKVStore& kv,
               float* out) {
  const std::string prefix = "model.layers." + std::to_string(layer) + ".self_attn";
  const int64_t R = rows.R, C = cfg.d_model, Hq = cfg.n_heads, Hkv = cfg.n_kv_heads,
                D = cfg.head_dim;
  float* q = scratch(kQ, R * Hq * D);
  float* k = scratch(kK, R * Hkv * D);
  float* v = scratch(kV, R * Hkv * D);
  linears(w, {prefix + ".q_proj", prefix + ".k_proj", prefix + ".v_proj"}, h, R, C, {q, k, v});
  if (cfg.qk_norm) {
    paged::norm_rows("rmsnorm", q, R * Hq, D, D, weight(w, prefix + ".q_norm.weight"), nullptr,
                     cfg.norm_eps, q, D);
    paged::norm_rows("rmsnorm", k, R * Hkv, D, D, weight(w, prefix + ".k_norm.weight"), nullptr,
                     cfg.norm_eps, k, D);
  }
  if (cfg.pos == "rope") {
    const float* cs = weight(w, "#rope.cos");
    const float* sn = weight(w, "#rope.sin");
    paged::rope_rows(q, R, Hq * D, Hq, D, rows.pos.data(), cs, sn);
    paged::rope_rows(k, R, Hkv * D, Hkv, D, rows.pos.data(), cs, sn);
  }
  const bool bf16 = kv.dtype() == DType::BFloat16;
  void* kc = kv.k(layer).raw_data();
  void* vc = kv.v(layer).raw_data();
  const int64_t row = Hkv * D;
  for (int64_t r = 0; r < R; ++r) {
    const auto& table = *chunks[rows.chunk[r]].block_table;
    const int64_t p = rows.pos[r], slot = table[static_cast<size_t>(p / kKVBlockSize)] * kKVBlockSize + p % kKVBlockSize;
    if (bf16) {  // rounded to nearest-even (kernels/bf16.h)
      uint16_t* kd = static_cast<uint16_t*>(kc) + slot * row;
      uint16_t* vd = static_cast<uint16_t*>(vc) + slot * row;
      for (int64_t j = 0; j < row; ++j) {
        kd[j] = kernels::bfloat16_bits(k[r * row + j]);
        vd[j] = kernels::bfloat16_bits(v[r * row + j]);
      }
    } else {
      std::memcpy(static_cast<float*>(kc) + slot * row, &k[r * row], row * sizeof(float));
      std::memcpy(static_cast<float*>(vc) + slot * row, &v[r * row], row * sizeof(float));
    }
  }
  paged::AttnArgs a;
  a.k = kc;
  a.v = vc;
  a.bf16 = bf16;
  a.Hkv = Hkv;
  a.D = D;
  a.group = Hq / Hkv;
  a.scale = 1.0 / std::sqrt(static_cast<double>(D));
  a.softcap = cfg.attn_softcap;
  const int64_t window = cfg.layer_window(layer);
  const int64_t max_pos = *std::max_element(rows.pos.begin(), rows.pos.end());
  // Work items: (row, group of heads); few rows are split into more head groups so that both
  // threads have work. A head's output does not depend on its group.
  const int64_t groups = std::clamp<int64_t>(16 / R, 1, Hq);
#pragma omp parallel if (R * Hq * (max_pos + 1) * D >= (1 << 15))
  {
    std::vector<float> probs(static_cast<size_t>(Hq * (max_pos + 1)));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < R * groups; ++i) {
      const int64_t r = i / groups, g = i % groups, p = rows.pos[r];
      const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      paged::attend_row(a, q + r * Hq * D, Hq * g / groups, Hq * (g + 1) / groups,
                        *chunks[rows.chunk[r]].block_table, lo, p, out + r * Hq * D, probs.data());
    }
  }
}

void block(const Weights& w, const nn::ModelConfig& cfg, int64_t layer, float* x, const Rows& rows,
           const std::vector<SeqChunk>& chunks, PagedKVStore& kv) {
  const int64_t R = rows.R, C = cfg.d_model, HD = cfg.n_heads * cfg.head_dim;
  const std::string p = "model.layers." + std::to_string(layer);
  float* h = scratch(kH, R * C);
  float* att = scratch(kAtt, R * HD);
  float* o = scratch(kO, R * C);
  float* m = scratch(kM, R * C);
  norm(w, cfg, p + ".input_layernorm", x, R, C, h);
  attention(w, cfg, layer, h, rows, chunks, kv, att);
  linear(w, p + ".self_attn.o_proj", att, R, HD, o);
  if (cfg.parallel_block) {
    mlp(w, cfg, layer, h, R, m);
    for (int64_t i = 0; i < R * C; ++i) x[i] = (x[i] + o[i]) + m[i];
    return;
  }
  for (int64_t i = 0; i < R * C; ++i) x[i] += o[i];
  norm(w, cfg, p + ".post_attention_layernorm", x, R, C, h);
  mlp(w, cfg, layer, h, R, m);
  for (int64_t i = 0; i < R * C; ++i) x[i] += m[i];
}

Rows collect_rows(const nn::ModelConfig& cfg, const std::vector<SeqChunk>& chunks, const PagedKVStore& kv) {
  Rows rows;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SeqChunk& s = chunks[c];
    EMBER_CHECK(s.tokens && s.block_table && s.n_tokens > 0 && s.pos0 >= 0,
                "InferenceModel: chunk ", c, " has no tokens or no block table");
    const int64_t end = s.pos0 + s.n_tokens;
    EMBER_CHECK(end <= cfg.max_seq_len, "InferenceModel: ", end, " positions exceed max_seq_len ",
                cfg.max_seq_len);
    EMBER_CHECK(static_cast<int64_t>(s.block_table->size()) * kKVBlockSize >= end,
                "InferenceModel: chunk ", c, "'s block table is too short for ", end, " positions");
    for (int64_t b = 0; b < (end + kKVBlockSize - 1) / kKVBlockSize; ++b) {
      const int32_t id = (*s.block_table)[static_cast<size_t>(b)];
      EMBER_CHECK(id >= 0 && id < kv.n_blocks(), "InferenceModel: block ", id, " out of range");
    }
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      EMBER_CHECK(s.tokens[t] >= 0 && s.tokens[t] < cfg.vocab_size, "InferenceModel: token id ",
                  s.tokens[t], " out of range [0, ", cfg.vocab_size, ")");
      rows.token.push_back(s.tokens[t]);
      rows.pos.push_back(s.pos0 + t);
      rows.chunk.push_back(static_cast<int64_t>(c));
    }
  }
  rows.R = static_cast<int64_t>(rows.token.size());
  return rows;
}

}  // namespace

Tensor InferenceModel::forward(const std::vector<SeqChunk>& chunks, PagedKVStore& kv) const {
  EMBER_CHECK(!chunks.empty(), "InferenceModel: forward needs at least one chunk");
  const Rows rows = collect_rows(cfg_, chunks, kv);
  const int64_t R = rows.R, C = cfg_.d_model, V = cfg_.vocab_size;
  float* x = scratch(kX, R * C);
  const Weights w{w_, packed_};
  const kernels::PackedWeight& emb = linear_weight(w, "model.embed_tokens.weight");
  const float* pos_table = cfg_.pos == "learned"      ? weight(w, "model.embed_positions.weight")
                           : cfg_.pos == "sinusoidal" ? weight(w, "#sinusoidal")
                                                      : nullptr;
  for (int64_t r = 0; r < R; ++r) {
    emb.row(rows.token[r], x + r * C);  // in the weights' type, widened
    if (!pos_table) continue;
    for (int64_t c = 0; c < C; ++c) x[r * C + c] += pos_table[rows.pos[r] * C + c];
  }
  for (int64_t l = 0; l < cfg_.n_layers; ++l) block(w, cfg_, l, x, rows, chunks, kv);
  std::vector<int64_t> out_rows;
  int64_t r0 = 0;
  for (const SeqChunk& s : chunks) {
    for (int64_t t = s.all_logits ? 0 : s.n_tokens - 1; t < s.n_tokens; ++t) out_rows.push_back(r0 + t);
    r0 += s.n_tokens;
  }
  const int64_t RL = static_cast<int64_t>(out_rows.size());
  float* sel = scratch(kSel, RL * C);
  float* h = scratch(kHead, RL * C);
  for (int64_t i = 0; i < RL; ++i) std::memcpy(&sel[i * C], &x[out_rows[i] * C], C * sizeof(float));
  norm(w, cfg_, "model.norm", sel, RL, C, h);
  Tensor logits = Tensor::empty({RL, V});
  float* lp = logits.data<float>();
  const bool tied = cfg_.tie_embeddings;
  linear_weight(w, tied ? "model.embed_tokens.weight" : "lm_head.weight").matmul(RL, h, C, nullptr, lp, V);
  if (cfg_.final_softcap > 0) {
    const float cap = static_cast<float>(cfg_.final_softcap);
    for (int64_t i = 0; i < RL * V; ++i) lp[i] = std::tanh(lp[i] / cap) * cap;
  }
  return logits;
}

}  // namespace ember::inference
