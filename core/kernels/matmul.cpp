// Batched matmul (see matmul.h). float32 and bfloat16 operands run on oneDNN
// matmul primitives (bfloat16 with a float32 C, accumulating in float32),
// created once per (operand type, M, N, K, batch, strides, alpha, beta) and
// cached; float64 (and any shape oneDNN declines) on a cache-blocked reference
// kernel; float32 with M = 1 and contiguous rows of op(B)^T on gemv_rows
// (kernels/gemv.h). This is the only file in ember that includes oneDNN.
//   C[b] = alpha * op(A)[b] @ op(B)[b] + beta * C[b],   op(A)[b]: [M, K], op(B)[b]: [K, N]
#include "core/kernels/matmul.h"

#include <omp.h>

#include "core/kernels/bf16.h"
#include "core/kernels/cpu_isa.h"
#include "core/kernels/gemv.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace ember::kernels {
namespace {

// One operand's matrix: element (r, c) sits at data + r * rs + c * cs.
struct Mat {
  int64_t rs, cs;
};

// One strided (possibly batched) gemm; strides in elements, batch strides may be 0.
struct Gemm {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  int64_t sa = 0, sb = 0, sc = 0;
  Mat a{}, b{}, c{};
  char* pa = nullptr;
  char* pb = nullptr;
  char* pc = nullptr;
  double alpha = 1, beta = 0;
  DType in = DType::Float32;  // of A and B; C is float64 for float64, else float32
  bool varying = false;       // M and K change call to call: give them to oneDNN at run time
};

// Bytes per element of A and B, and of C.
int64_t operand_size(DType in) { return static_cast<int64_t>(dtype_size(in)); }
int64_t result_size(DType in) { return in == DType::Float64 ? 8 : 4; }

// A batch dim left over after collapsing, run as an outer loop.
struct BatchDim {
  int64_t size, sa, sb, sc;
};

// gemm libraries need one unit stride per matrix and a leading dimension that
// covers the other; anything else (step slices, expanded dims) is copied.
bool plain_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const bool row_major = (cols == 1 || cs == 1) && (rows == 1 || rs >= cols);
  const bool col_major = (rows == 1 || rs == 1) && (cols == 1 || cs >= rows);
  return row_major || col_major;
}

bool plain_last2(const Tensor& t) {
  return plain_matrix(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1));
}

// Gives size-1 dims the stride a gemm expects, so equal layouts get equal keys.
void normalize(Mat& m, int64_t rows, int64_t cols) {
  if (cols == 1) m.cs = 1;
  if (rows == 1) m.rs = m.cs == 1 ? cols : 1;
}

// --- float64 / fallback: cache-blocked reference kernel ----------------------------

// An operand element as the compute type T; In = uint16_t holds bfloat16 bits.
template <class T, class In>
T load(In x) {
  if constexpr (std::is_same_v<In, uint16_t>) {
    return std::bit_cast<float>(static_cast<uint32_t>(x) << 16);
  } else {
    return x;
  }
}

// T: the type of C and of the accumulation; In: the stored type of A and B.
template <class T, class In = T>
void reference_gemm(const Gemm& g) {
  constexpr int64_t MB = 64, NB = 256, KB = 256;
  const int64_t mblocks = (g.M + MB - 1) / MB, nblocks = (g.N + NB - 1) / NB;
  const int64_t jobs = g.batch * mblocks * nblocks;
  const double work = static_cast<double>(g.batch) * g.M * g.N * std::max<int64_t>(g.K, 1);
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
#pragma omp parallel if (jobs > 1 && work > 65536 && !omp_in_parallel())
  {
    std::vector<T> pack(KB * NB), tile(MB * NB);
#pragma omp for schedule(static)
    for (int64_t job = 0; job < jobs; ++job) {
      const int64_t bi = job / (mblocks * nblocks), rest = job % (mblocks * nblocks);
      const int64_t i0 = (rest / nblocks) * MB, i1 = std::min(g.M, i0 + MB);
      const int64_t j0 = (rest % nblocks) * NB, j1 = std::min(g.N, j0 + NB), nb = j1 - j0;
      const In* A = reinterpret_cast<const In*>(g.pa) + bi * g.sa;
      const In* B = reinterpret_cast<const In*>(g.pb) + bi * g.sb;
      T* C = reinterpret_cast<T*>(g.pc) + bi * g.sc;
      std::fill(tile.begin(), tile.end(), T(0));
      for (int64_t k0 = 0; k0 < g.K; k0 += KB) {
        const int64_t k1 = std::min(g.K, k0 + KB);
        for (int64_t k = k0; k < k1; ++k) {  // B block -> contiguous [kb, nb]
          T* dst = pack.data() + (k - k0) * nb;
          for (int64_t j = j0; j < j1; ++j) dst[j - j0] = load<T>(B[k * g.b.rs + j * g.b.cs]);
        }
        for (int64_t i = i0; i < i1; ++i) {
          T* t = tile.data() + (i - i0) * nb;
          for (int64_t k = k0; k < k1; ++k) {
            const T aik = load<T>(A[i * g.a.rs + k * g.a.cs]);
            const T* bp = pack.data() + (k - k0) * nb;
            for (int64_t j = 0; j < nb; ++j) t[j] += aik * bp[j];
          }
        }
      }
      for (int64_t i = i0; i < i1; ++i) {
        const T* t = tile.data() + (i - i0) * nb;
        T* crow = C + i * g.c.rs;
        for (int64_t j = j0; j < j1; ++j) {
          T& cij = crow[j * g.c.cs];
          cij = beta == T(0) ? alpha * t[j - j0] : alpha * t[j - j0] + beta * cij;
        }
      }
    }
  }
}

void reference_gemm(const Gemm& g) {
  switch (g.in) {
    case DType::Float64: return reference_gemm<double>(g);
    case DType::BFloat16: return reference_gemm<float, uint16_t>(g);
    default: return reference_gemm<float>(g);
  }
}

// --- float32 / bfloat16: cached oneDNN primitives ---------------------------------

// A primitive and its memory objects, whose data handles are set per call; the
// mutex keeps one execution at a time (shared handles, library scratchpad).
struct Cached {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
  std::mutex mutex;
};

using Key = std::array<int64_t, 16>;

// EMBER_MAX_ISA, when set and ONEDNN_MAX_CPU_ISA is not, caps oneDNN too. oneDNN
// takes a cap only before its first use: every oneDNN call goes through runtime().
bool pass_isa_cap_to_onednn() {
  const Isa cap = max_isa();
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA") || cap == Isa::Avx512Bf16) return false;
  using dnnl::cpu_isa;
  const cpu_isa level = cap == Isa::Generic ? cpu_isa::sse41 : cap == Isa::Avx2 ? cpu_isa::avx2 : cpu_isa::avx512_core;
  dnnl::set_max_cpu_isa(level);
  return true;
}

struct Runtime {
  bool isa_capped = pass_isa_cap_to_onednn();  // first: before the engine exists
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  std::map<Key, std::unique_ptr<Cached>> cache;  // null: oneDNN declined
  int64_t created = 0;                           // primitives in the cache
};

Runtime& runtime() {
  static Runtime rt;
  return rt;
}

// Elements spanned by one [rows, cols] matrix (the batch stride of a size-1 batch dim).
int64_t span(int64_t rows, int64_t cols, const Mat& m) {
  return (rows - 1) * m.rs + (cols - 1) * m.cs + 1;
}

// A 2-D or 3-D descriptor; a shared (stride 0) operand gets batch dim 1 (oneDNN broadcast).
dnnl::memory::desc make_md(int64_t batch, int64_t stride, int64_t rows, int64_t cols,
                           const Mat& m, dnnl::memory::data_type type) {
  if (batch == 1) return dnnl::memory::desc({rows, cols}, type, {m.rs, m.cs});
  const bool shared = stride == 0;
  return dnnl::memory::desc({shared ? 1 : batch, rows, cols}, type,
                            {shared ? span(rows, cols, m) : stride, m.rs, m.cs});
}

std::unique_ptr<Cached> create_primitive(const Gemm& g) {
  Runtime& rt = runtime();
  using dt = dnnl::memory::data_type;
  const dt in = g.in == DType::BFloat16 ? dt::bf16 : dt::f32;
  // Run-time M and K: one primitive serves every group size (oneDNN then picks
  // its gemm:jit kernels, within a few % of the shape-specialised ones).
  const int64_t M = g.varying ? DNNL_RUNTIME_DIM_VAL : g.M, K = g.varying ? DNNL_RUNTIME_DIM_VAL : g.K;
  const auto a_md = make_md(g.batch, g.sa, M, K, g.a, in);
  const auto b_md = make_md(g.batch, g.sb, K, g.N, g.b, in);
  const auto c_md = make_md(g.batch, g.sc, M, g.N, g.c, dt::f32);
  dnnl::primitive_attr attr;
  if (g.alpha != 1) attr.set_output_scales(0, {static_cast<float>(g.alpha)});
  if (g.beta != 0) {
    dnnl::post_ops ops;
    ops.append_sum(static_cast<float>(g.beta));
    attr.set_post_ops(ops);
  }
  auto entry = std::make_unique<Cached>();
  try {
    const dnnl::matmul::desc desc(a_md, b_md, c_md);
    const dnnl::matmul::primitive_desc pd(desc, attr, rt.engine);
    entry->prim = dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    return nullptr;
  }
  if (!g.varying) {  // with run-time dims the memory objects are made per call
    entry->a = dnnl::memory(a_md, rt.engine, nullptr);
    entry->b = dnnl::memory(b_md, rt.engine, nullptr);
    entry->c = dnnl::memory(c_md, rt.engine, nullptr);
  }
  return entry;
}

Cached* lookup(const Gemm& g) {
  const auto bits = [](double x) { return int64_t{std::bit_cast<int32_t>(static_cast<float>(x))}; };
  // clang-format off
  const Key key{g.batch, g.varying ? -1 : g.M, g.N, g.varying ? -1 : g.K, g.a.rs, g.a.cs, g.sa, g.b.rs, g.b.cs, g.sb,
                g.c.rs, g.c.cs, g.sc, bits(g.alpha), bits(g.beta), static_cast<int64_t>(g.in)};
  // clang-format on
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  auto it = rt.cache.find(key);
  if (it == rt.cache.end()) {
    it = rt.cache.emplace(key, create_primitive(g)).first;
    rt.created += it->second != nullptr;
  }
  return it->second.get();  // entries are never erased
}

void onednn_gemm(Gemm g) {
  // x[B, T, C] @ W: fold the batch into M when B is shared and A, C rows run on across batches.
  if (g.batch > 1 && g.sb == 0 && g.a.cs == 1 && g.sa == g.M * g.a.rs && g.sc == g.M * g.c.rs) {
    g.M *= g.batch;
    g.batch = 1;
  }
  if (g.batch == 1) g.sa = g.sb = g.sc = 0;
  g.varying = g.varying && g.batch == 1;
  Cached* entry = lookup(g);
  if (!entry) {
    if (g.batch == 1) return reference_gemm(g);
    Gemm one = g;  // oneDNN declined the batched form: loop over 2-D gemms
    one.batch = 1;
    const int64_t es = operand_size(g.in);
    for (int64_t i = 0; i < g.batch; ++i) {
      one.pa = g.pa + i * g.sa * es;
      one.pb = g.pb + i * g.sb * es;
      one.pc = g.pc + i * g.sc * 4;
      onednn_gemm(one);
    }
    return;
  }
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(entry->mutex);
  if (g.varying) {
    using dt = dnnl::memory::data_type;
    const dt in = g.in == DType::BFloat16 ? dt::bf16 : dt::f32;
    const dnnl::memory a(make_md(1, 0, g.M, g.K, g.a, in), rt.engine, g.pa);
    const dnnl::memory b(make_md(1, 0, g.K, g.N, g.b, in), rt.engine, g.pb);
    const dnnl::memory c(make_md(1, 0, g.M, g.N, g.c, dt::f32), rt.engine, g.pc);
    entry->prim.execute(rt.stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    rt.stream.wait();
    return;
  }
  entry->a.set_data_handle(g.pa);
  entry->b.set_data_handle(g.pb);
  entry->c.set_data_handle(g.pc);
  entry->prim.execute(
      rt.stream,
      {{DNNL_ARG_SRC, entry->a}, {DNNL_ARG_WEIGHTS, entry->b}, {DNNL_ARG_DST, entry->c}});
  rt.stream.wait();
}

// A read transposed (A(m, k) at k * cs, rows of C are weight rows: the weight
// gradient dW = dY^T X of a Linear): oneDNN's sgemm (gemm:jit) runs these 3-8%
// faster than the matmul primitive (bench/bench_matmul, dense-small's step 3-4%
// faster); the primitive is as fast or faster on every other layout.
bool sgemm_suits(const Gemm& g) {
  const bool a_transposed = g.a.rs == 1 && g.a.cs > 1;
  const bool b_plain = g.b.cs == 1 || g.b.rs == 1;
  return g.in == DType::Float32 && g.batch == 1 && !g.varying && a_transposed && b_plain &&
         g.c.cs == 1 && g.c.rs >= g.N;
}

// C = alpha op(A) op(B) + beta C through dnnl_sgemm (row-major, transposes as flags).
void onednn_sgemm(const Gemm& g) {
  runtime();  // EMBER_MAX_ISA's cap first
  const char ta = g.a.cs == 1 ? 'N' : 'T', tb = g.b.cs == 1 ? 'N' : 'T';
  const int64_t lda = ta == 'N' ? g.a.rs : g.a.cs, ldb = tb == 'N' ? g.b.rs : g.b.cs;
  const dnnl_status_t status =
      dnnl_sgemm(ta, tb, g.M, g.N, g.K, static_cast<float>(g.alpha),
                 reinterpret_cast<const float*>(g.pa), std::max<int64_t>(lda, 1),
                 reinterpret_cast<const float*>(g.pb), std::max<int64_t>(ldb, 1),
                 static_cast<float>(g.beta), reinterpret_cast<float*>(g.pc), g.c.rs);
  if (status != dnnl_success) onednn_gemm(g);
}

void run_gemm(const Gemm& g) {
  if (g.in == DType::Float64 || g.K == 0) return reference_gemm(g);  // K = 0: C = beta * C
  if (g.in == DType::Float32 && g.batch == 1 && g.M == 1 && g.a.cs == 1 && g.b.rs == 1) {
    // x [1, K] W[N, K]^T: decoding
    return gemv_rows(g.N, g.K, reinterpret_cast<const float*>(g.pa),
                     reinterpret_cast<const float*>(g.pb), g.b.cs, reinterpret_cast<float*>(g.pc),
                     g.c.cs, static_cast<float>(g.alpha), static_cast<float>(g.beta));
  }
  if (sgemm_suits(g)) return onednn_sgemm(g);
  onednn_gemm(g);
}

// Runs the outer batch dims as loops around the innermost batched gemm.
void run_batches(const Gemm& g, const std::vector<BatchDim>& outer, size_t d) {
  if (d == outer.size()) return run_gemm(g);
  const int64_t es = operand_size(g.in), ec = result_size(g.in);
  Gemm sub = g;
  for (int64_t i = 0; i < outer[d].size; ++i) {
    sub.pa = g.pa + i * outer[d].sa * es;
    sub.pb = g.pb + i * outer[d].sb * es;
    sub.pc = g.pc + i * outer[d].sc * ec;
    run_batches(sub, outer, d + 1);
  }
}

std::string describe(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  return detail::concat("a ", shape_str(a.shape()), " (trans_a=", trans_a, ") and b ",
                        shape_str(b.shape()), " (trans_b=", trans_b, ")");
}

Shape check_and_shape(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  EMBER_CHECK(a.defined() && b.defined(), "matmul: undefined operand");
  EMBER_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: operands need at least 2 dims, got ",
              describe(a, b, trans_a, trans_b));
  EMBER_CHECK(is_floating(a.dtype()) || a.dtype() == DType::BFloat16,
              "matmul: expected float32, float64 or bfloat16 operands, got ",
              dtype_name(a.dtype()), " for ", describe(a, b, trans_a, trans_b));
  EMBER_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: a is ", dtype_name(a.dtype()),
              ", b is ", dtype_name(b.dtype()), " for ", describe(a, b, trans_a, trans_b));
  const int64_t M = trans_a ? a.size(-1) : a.size(-2), ka = trans_a ? a.size(-2) : a.size(-1);
  const int64_t kb = trans_b ? b.size(-1) : b.size(-2), N = trans_b ? b.size(-2) : b.size(-1);
  EMBER_CHECK(ka == kb, "matmul: inner dimensions differ (", ka, " vs ", kb, ") for ",
              describe(a, b, trans_a, trans_b));
  const Shape ba(a.shape().begin(), a.shape().end() - 2),
      bb(b.shape().begin(), b.shape().end() - 2);
  Shape out;
  try {
    out = broadcast_shapes(ba, bb);
  } catch (const Error&) {
    throw Error(detail::concat("matmul: batch dims ", shape_str(ba), " and ", shape_str(bb),
                               " do not broadcast for ", describe(a, b, trans_a, trans_b)));
  }
  out.push_back(M);
  out.push_back(N);
  return out;
}

// Stride of batch dim d (of nb) for t, 0 where t is missing the dim or broadcasts it.
int64_t batch_stride(const Tensor& t, size_t d, size_t nb, int64_t size) {
  const size_t tb = static_cast<size_t>(t.dim()) - 2;
  if (d < nb - tb) return 0;
  const size_t td = d - (nb - tb);
  return t.shape()[td] == size ? t.strides()[td] : 0;
}

// float64 for float64 operands, else float32.
DType result_dtype(DType operands) {
  return operands == DType::Float64 ? DType::Float64 : DType::Float32;
}

}  // namespace

int64_t matmul_primitive_cache_size() {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mutex);
  return rt.created;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  Tensor c = Tensor::empty(check_and_shape(a, b, trans_a, trans_b), result_dtype(a.dtype()));
  matmul_into(c, a, b, trans_a, trans_b, 1, 0);
  return c;
}

namespace {

void matmul_into_impl(Tensor& c, const Tensor& a_in, const Tensor& b_in, bool trans_a, bool trans_b,
                      double alpha, double beta, bool varying) {
  const Shape c_shape = check_and_shape(a_in, b_in, trans_a, trans_b);
  EMBER_CHECK(c.defined() && c.shape() == c_shape, "matmul_into: c has shape ",
              c.defined() ? shape_str(c.shape()) : "(undefined)", " but ",
              describe(a_in, b_in, trans_a, trans_b), " give ", shape_str(c_shape));
  EMBER_CHECK(c.dtype() == result_dtype(a_in.dtype()), "matmul_into: c is ", dtype_name(c.dtype()),
              " but the operands are ", dtype_name(a_in.dtype()));
  // (contiguous() below would need arithmetic on bfloat16; kernels::to_bfloat16 gives plain layouts)
  EMBER_CHECK(a_in.dtype() != DType::BFloat16 || (plain_last2(a_in) && plain_last2(b_in)),
              "matmul: bfloat16 operands need a row- or column-major layout, got ",
              describe(a_in, b_in, trans_a, trans_b));
  c.bump_version();
  if (c.numel() == 0) return;
  const Tensor a = plain_last2(a_in) ? a_in : a_in.contiguous();
  const Tensor b = plain_last2(b_in) ? b_in : b_in.contiguous();
  const bool c_plain = plain_last2(c);
  const Tensor cw = c_plain ? c : (beta != 0 ? c.clone() : Tensor::empty(c.shape(), c.dtype()));

  Gemm g;
  g.M = c_shape[c_shape.size() - 2];
  g.N = c_shape.back();
  g.K = trans_a ? a.size(-2) : a.size(-1);
  g.a = trans_a ? Mat{a.stride(-1), a.stride(-2)} : Mat{a.stride(-2), a.stride(-1)};
  g.b = trans_b ? Mat{b.stride(-1), b.stride(-2)} : Mat{b.stride(-2), b.stride(-1)};
  g.c = Mat{cw.stride(-2), cw.stride(-1)};
  g.pa = static_cast<char*>(a.raw_data());
  g.pb = static_cast<char*>(b.raw_data());
  g.pc = static_cast<char*>(cw.raw_data());
  g.alpha = alpha;
  g.beta = beta;
  g.in = a.dtype();
  g.varying = varying;

  // Collapse the batch dims: drop size 1, merge dims that are nested in all three.
  const size_t nb = c_shape.size() - 2;
  std::vector<BatchDim> dims;
  for (size_t d = 0; d < nb; ++d) {
    const int64_t n = c_shape[d];
    if (n == 1) continue;
    const BatchDim bd{n, batch_stride(a, d, nb, n), batch_stride(b, d, nb, n), cw.strides()[d]};
    if (!dims.empty()) {
      BatchDim& p = dims.back();
      if (p.sa == bd.sa * n && p.sb == bd.sb * n && p.sc == bd.sc * n) {
        p = BatchDim{p.size * n, bd.sa, bd.sb, bd.sc};
        continue;
      }
    }
    dims.push_back(bd);
  }
  if (!dims.empty()) {
    g.batch = dims.back().size;
    g.sa = dims.back().sa;
    g.sb = dims.back().sb;
    g.sc = dims.back().sc;
    dims.pop_back();
  }

  normalize(g.a, g.M, g.K);
  normalize(g.b, g.K, g.N);
  normalize(g.c, g.M, g.N);
  if (g.c.cs != 1) {  // C's rows are strided: compute C^T = op(B)^T op(A)^T instead
    std::swap(g.M, g.N);
    std::swap(g.pa, g.pb);
    std::swap(g.sa, g.sb);
    const Mat a_t{g.b.cs, g.b.rs}, b_t{g.a.cs, g.a.rs};
    g.a = a_t;
    g.b = b_t;
    g.c = Mat{g.c.cs, g.c.rs};
    for (BatchDim& d : dims) std::swap(d.sa, d.sb);
    normalize(g.a, g.M, g.K);
    normalize(g.b, g.K, g.N);
    normalize(g.c, g.M, g.N);
  }
  run_batches(g, dims, 0);
  if (!c_plain) c.copy_(cw);
}

}  // namespace

void matmul_into(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                 double alpha, double beta) {
  matmul_into_impl(c, a, b, trans_a, trans_b, alpha, beta, false);
}

void matmul_into_varying(Tensor& c, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                         double alpha, double beta) {
  EMBER_CHECK(a.dim() == 2 && b.dim() == 2, "matmul_into_varying: 2-D operands only, got ",
              describe(a, b, trans_a, trans_b));
  matmul_into_impl(c, a, b, trans_a, trans_b, alpha, beta, true);
}

bool bf16_matmul_native() {
  runtime();  // EMBER_MAX_ISA's cap first
  const int isa = static_cast<int>(dnnl::get_effective_cpu_isa());
  const int bf16 = static_cast<int>(dnnl::cpu_isa::avx512_core_bf16);  // ISA values are nested bit masks
  return (isa & bf16) == bf16;
}

const char* onednn_isa_name(int isa) {
  switch (static_cast<dnnl::cpu_isa>(isa)) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "reference";  // cpu_isa::all: no JIT code at all
  }
}

const char* onednn_cpu_isa() {
  runtime();  // EMBER_MAX_ISA's cap first
  return onednn_isa_name(static_cast<int>(dnnl::get_effective_cpu_isa()));
}

}  // namespace ember::kernels
