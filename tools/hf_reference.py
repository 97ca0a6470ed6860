#!/usr/bin/env python3
"""Independent reader of a Hugging Face model folder: logits of LlamaForCausalLM,
Qwen3ForCausalLM, Qwen3MoeForCausalLM and GPT2LMHeadModel (and the one row of
{Llama,Qwen3,Qwen3Moe}ForSequenceClassification, a reward model's export), written from the
transformers modeling code (modeling_llama.py, modeling_qwen3.py,
modeling_qwen3_moe.py, modeling_gpt2.py), not from ember's.

Pure Python 3 standard library (no numpy, no torch): its own safetensors reader
(struct + json), float64 arithmetic. Reads only DIR/config.json and
DIR/model.safetensors.

    hf_reference.py DIR ID [ID ...]   ->  {"architecture": ..., "logits": [[V floats] per position]}
"""
import json
import math
import struct
import sys

# ---------------------------------------------------------------------------------------
# safetensors: u64 little-endian header length N, N bytes of JSON, then raw data.

_DTYPES = {"F32": ("f", 4), "F64": ("d", 8), "F16": ("e", 2)}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        count = 1
        for s in e["shape"]:
            count *= s
        raw = bytes(data[begin:end])
        if e["dtype"] == "BF16":
            values = [struct.unpack("<f", b"\0\0" + raw[2 * i:2 * i + 2])[0] for i in range(count)]
        else:
            code, size = _DTYPES[e["dtype"]]
            assert end - begin == count * size, name
            values = list(struct.unpack("<%d%s" % (count, code), raw))
        tensors[name] = (list(e["shape"]), values)
    return tensors


class Weights:
    """Named tensors as nested Python lists: 1-D -> list, 2-D -> list of rows."""

    def __init__(self, tensors):
        self.t = tensors

    def has(self, name):
        return name in self.t

    def get(self, name):
        shape, v = self.t[name]
        if len(shape) == 1:
            return v
        assert len(shape) == 2, name
        r, c = shape
        return [v[i * c:(i + 1) * c] for i in range(r)]


# ---------------------------------------------------------------------------------------
# building blocks (torch semantics)

def linear(x, w, b=None):
    """nn.Linear: y = x W^T + b with W [out, in]; x is a list of rows."""
    out = []
    for row in x:
        y = [sum(a * c for a, c in zip(row, wr)) for wr in w]
        if b is not None:
            y = [v + bb for v, bb in zip(y, b)]
        out.append(y)
    return out


def conv1d(x, w, b):
    """transformers' Conv1D (GPT-2): y = x W + b with W [in, out]."""
    cols = list(zip(*w))
    return [[sum(a * c for a, c in zip(row, col)) + bb for col, bb in zip(cols, b)] for row in x]


def rms_norm(v, w, eps):
    """LlamaRMSNorm / Qwen3RMSNorm: w * v / sqrt(mean(v^2) + eps)."""
    r = 1.0 / math.sqrt(sum(a * a for a in v) / len(v) + eps)
    return [wi * a * r for wi, a in zip(w, v)]


def layer_norm(v, w, b, eps):
    mean = sum(v) / len(v)
    var = sum((a - mean) ** 2 for a in v) / len(v)
    r = 1.0 / math.sqrt(var + eps)
    return [(a - mean) * r * wi + bi for a, wi, bi in zip(v, w, b)]


def act_fn(name):
    """transformers' ACT2FN entries used by these classes."""
    if name == "silu":
        return lambda x: x / (1.0 + math.exp(-x)) if x > -700 else 0.0
    if name == "gelu":  # GELUActivation: exact erf form
        return lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        c = math.sqrt(2.0 / math.pi)
        return lambda x: 0.5 * x * (1.0 + math.tanh(c * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return lambda x: max(x, 0.0)
    raise NotImplementedError("activation " + name)


def softmax(v):
    m = max(v)
    e = [math.exp(a - m) for a in v]
    s = sum(e)
    return [a / s for a in e]


def causal_attention(q, k, v, n_heads, n_kv_heads, head_dim, scaling):
    """q [T][n_heads*head_dim], k/v [T][n_kv*head_dim]; repeat_kv: query head j reads
    kv head j // (n_heads / n_kv_heads). Returns [T][n_heads*head_dim]."""
    T = len(q)
    n_rep = n_heads // n_kv_heads
    out = [[0.0] * (n_heads * head_dim) for _ in range(T)]
    for h in range(n_heads):
        kh = h // n_rep
        qs, ks = slice(h * head_dim, (h + 1) * head_dim), slice(kh * head_dim, (kh + 1) * head_dim)
        for t in range(T):
            scores = [sum(a * b for a, b in zip(q[t][qs], k[s][ks])) * scaling for s in range(t + 1)]
            p = softmax(scores)
            for i in range(head_dim):
                out[t][h * head_dim + i] = sum(p[s] * v[s][kh * head_dim + i] for s in range(t + 1))
    return out


def rope(x, n, head_dim, theta, t):
    """apply_rotary_pos_emb at position t: x*cos + rotate_half(x)*sin per head, with
    inv_freq = theta^(-(0,2,..)/head_dim) and emb = cat(freqs, freqs)."""
    half = head_dim // 2
    inv = [1.0 / theta ** (2 * i / head_dim) for i in range(half)]
    cos = [math.cos(t * f) for f in inv] * 2
    sin = [math.sin(t * f) for f in inv] * 2
    out = []
    for h in range(n):
        v = x[h * head_dim:(h + 1) * head_dim]
        rot = [-a for a in v[half:]] + v[:half]
        out += [a * c + r * s for a, r, c, s in zip(v, rot, cos, sin)]
    return out


# ---------------------------------------------------------------------------------------
# LlamaForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM

def llama_family(cfg, w, ids, arch):
    x = llama_hidden(cfg, w, ids, arch)
    tied = cfg.get("tie_word_embeddings", False)
    return linear(x, w.get("model.embed_tokens.weight" if tied else "lm_head.weight"))


# The sequence classifiers (a reward model's export) and the decoder each one wraps: transformers'
# GenericForSequenceClassification (modeling_layers.py) over the `model` of the causal class.
SEQUENCE_CLASSIFIERS = {"LlamaForSequenceClassification": "LlamaForCausalLM",
                        "Qwen3ForSequenceClassification": "Qwen3ForCausalLM",
                        "Qwen3MoeForSequenceClassification": "Qwen3MoeForCausalLM"}


def sequence_classification(cfg, w, ids):
    """{Llama,Qwen3,Qwen3Moe}ForSequenceClassification: score.weight [num_labels, d] (no bias) on
    the final-norm output of the class's decoder, read at the rightmost token that is not
    pad_token_id (the last one without a pad_token_id). One row of logits [num_labels]."""
    x = llama_hidden(cfg, w, ids, SEQUENCE_CLASSIFIERS[cfg["architectures"][0]])
    pad = cfg.get("pad_token_id")
    last = -1 if pad is None else max([t for t, i in enumerate(ids) if i != pad], default=0)
    return linear([x[last]], w.get("score.weight"))


def llama_hidden(cfg, w, ids, arch):
    """The final-norm output [T][d] of the Llama/Qwen3 decoder."""
    for key in ("rope_scaling",):
        if cfg.get(key) is not None:
            raise NotImplementedError(key)
    if cfg.get("use_sliding_window"):
        raise NotImplementedError("use_sliding_window")
    d = cfg["hidden_size"]
    n_heads = cfg["num_attention_heads"]
    # the classes' own defaults for missing keys (configuration_{llama,qwen3,qwen3_moe}.py)
    qwen3 = arch == "Qwen3ForCausalLM"
    n_kv = cfg.get("num_key_value_heads", n_heads if arch == "LlamaForCausalLM" else 32 if qwen3 else 4)
    n_kv = n_kv or n_heads
    head_dim = cfg.get("head_dim", 128 if qwen3 else None) or d // n_heads
    eps = cfg["rms_norm_eps"]
    theta = cfg.get("rope_theta", 10000.0)
    act = act_fn(cfg.get("hidden_act", "silu"))
    qk_norm = arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
    attn_bias = cfg.get("attention_bias", False)
    mlp_bias = arch == "LlamaForCausalLM" and cfg.get("mlp_bias", False)
    T = len(ids)

    def mlp(prefix, x):
        def bias(n):
            return w.get(prefix + n + ".bias") if mlp_bias else None
        g = linear(x, w.get(prefix + "gate_proj.weight"), bias("gate_proj"))
        u = linear(x, w.get(prefix + "up_proj.weight"), bias("up_proj"))
        hidden = [[act(a) * b for a, b in zip(gr, ur)] for gr, ur in zip(g, u)]
        return linear(hidden, w.get(prefix + "down_proj.weight"), bias("down_proj"))

    def sparse_moe(prefix, x):
        # Qwen3MoeSparseMoeBlock: softmax over the router logits, top-k, optional renormalisation.
        router = linear(x, w.get(prefix + "gate.weight"))
        out = []
        for t in range(len(x)):
            p = softmax(router[t])
            top = sorted(range(len(p)), key=lambda e: (-p[e], e))[:cfg["num_experts_per_tok"]]
            weights = [p[e] for e in top]
            if cfg.get("norm_topk_prob", False):
                s = sum(weights)
                weights = [a / s for a in weights]
            y = [0.0] * d
            for e, we in zip(top, weights):
                ye = mlp(prefix + "experts.%d." % e, [x[t]])[0]
                y = [a + we * b for a, b in zip(y, ye)]
            out.append(y)
        return out

    x = [list(w.get("model.embed_tokens.weight")[i]) for i in ids]
    for li in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % li

        def proj(name, h):
            return linear(h, w.get(p + "self_attn." + name + ".weight"),
                          w.get(p + "self_attn." + name + ".bias") if attn_bias else None)

        h = [rms_norm(r, w.get(p + "input_layernorm.weight"), eps) for r in x]
        q, k, v = proj("q_proj", h), proj("k_proj", h), proj("v_proj", h)
        if qk_norm:  # q_norm / k_norm over head_dim, before RoPE
            qn, kn = w.get(p + "self_attn.q_norm.weight"), w.get(p + "self_attn.k_norm.weight")
            q = [sum((rms_norm(r[i:i + head_dim], qn, eps) for i in range(0, len(r), head_dim)), []) for r in q]
            k = [sum((rms_norm(r[i:i + head_dim], kn, eps) for i in range(0, len(r), head_dim)), []) for r in k]
        q = [rope(q[t], n_heads, head_dim, theta, t) for t in range(T)]
        k = [rope(k[t], n_kv, head_dim, theta, t) for t in range(T)]
        a = causal_attention(q, k, v, n_heads, n_kv, head_dim, head_dim ** -0.5)
        a = proj("o_proj", a)
        x = [[xi + ai for xi, ai in zip(xr, ar)] for xr, ar in zip(x, a)]
        h = [rms_norm(r, w.get(p + "post_attention_layernorm.weight"), eps) for r in x]
        sparse = (arch == "Qwen3MoeForCausalLM" and li not in cfg.get("mlp_only_layers", [])
                  and cfg["num_experts"] > 0 and (li + 1) % cfg.get("decoder_sparse_step", 1) == 0)
        m = sparse_moe(p + "mlp.", h) if sparse else mlp(p + "mlp.", h)
        x = [[xi + mi for xi, mi in zip(xr, mr)] for xr, mr in zip(x, m)]
    return [rms_norm(r, w.get("model.norm.weight"), eps) for r in x]


# ---------------------------------------------------------------------------------------
# GPT2LMHeadModel

def gpt2(cfg, w, ids):
    if not cfg.get("scale_attn_weights", True) or cfg.get("scale_attn_by_inverse_layer_idx", False):
        raise NotImplementedError("GPT-2 attention scaling options")
    pre = "transformer." if w.has("transformer.wte.weight") else ""
    d, n_heads = cfg["n_embd"], cfg["n_head"]
    head_dim = d // n_heads
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = act_fn(cfg.get("activation_function", "gelu_new"))
    wte, wpe = w.get(pre + "wte.weight"), w.get(pre + "wpe.weight")
    x = [[a + b for a, b in zip(wte[i], wpe[t])] for t, i in enumerate(ids)]
    for li in range(cfg["n_layer"]):
        p = pre + "h.%d." % li
        h = [layer_norm(r, w.get(p + "ln_1.weight"), w.get(p + "ln_1.bias"), eps) for r in x]
        qkv = conv1d(h, w.get(p + "attn.c_attn.weight"), w.get(p + "attn.c_attn.bias"))
        q, k, v = [r[:d] for r in qkv], [r[d:2 * d] for r in qkv], [r[2 * d:] for r in qkv]
        a = causal_attention(q, k, v, n_heads, n_heads, head_dim, 1.0 / math.sqrt(head_dim))
        a = conv1d(a, w.get(p + "attn.c_proj.weight"), w.get(p + "attn.c_proj.bias"))
        x = [[xi + ai for xi, ai in zip(xr, ar)] for xr, ar in zip(x, a)]
        h = [layer_norm(r, w.get(p + "ln_2.weight"), w.get(p + "ln_2.bias"), eps) for r in x]
        m = conv1d(h, w.get(p + "mlp.c_fc.weight"), w.get(p + "mlp.c_fc.bias"))
        m = [[act(a) for a in r] for r in m]
        m = conv1d(m, w.get(p + "mlp.c_proj.weight"), w.get(p + "mlp.c_proj.bias"))
        x = [[xi + mi for xi, mi in zip(xr, mr)] for xr, mr in zip(x, m)]
    x = [layer_norm(r, w.get(pre + "ln_f.weight"), w.get(pre + "ln_f.bias"), eps) for r in x]
    tied = cfg.get("tie_word_embeddings", True)
    return linear(x, wte if tied else w.get("lm_head.weight"))


def logits(folder, ids):
    with open(folder + "/config.json") as f:
        cfg = json.load(f)
    arch = cfg["architectures"][0]
    w = Weights(read_safetensors(folder + "/model.safetensors"))
    if arch == "GPT2LMHeadModel":
        return arch, gpt2(cfg, w, ids)
    if arch in ("LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
        return arch, llama_family(cfg, w, ids, arch)
    if arch in SEQUENCE_CLASSIFIERS:
        return arch, sequence_classification(cfg, w, ids)
    raise NotImplementedError(arch)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    arch, out = logits(sys.argv[1], [int(a) for a in sys.argv[2:]])
    json.dump({"architecture": arch, "logits": out}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
