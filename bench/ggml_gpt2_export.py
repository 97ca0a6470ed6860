#!/usr/bin/python3
"""An ember gpt2-small checkpoint in the model format of ggml's gpt-2 example, float32.

For a side-by-side of batched decoding with ggml's examples/gpt-2 (its
`gpt-2-batched` program: one prompt, then -np sequences decoded together),
built from a ggml checkout outside this project (never committed here):
  /usr/bin/python3 bench/ggml_gpt2_export.py CKPT.h5 gpt2-f32.bin
  gpt-2-batched -m gpt2-f32.bin -np 16 -n 256 -c 8192 -p "$(printf 'a%.0s' {1..128})" --ignore-eos -t 2
and its "predict time" over the -n decode steps against `bench_engine
--engine-only` (ember's B = 1 and B = 16 decode steps).
The format: magic, hparams, the vocabulary (here bytes 0-255, then placeholder
names: the example only needs one entry a token for a byte prompt), then each
tensor as (dims, name length, type 0 = float32, dims innermost first, name,
data). q, k and v go in as one c_attn of 2304 x 768 rows; the tied lm_head is
written out as its own copy, as the example reads it.
"""
import struct
import sys

import h5py
import numpy as np

if len(sys.argv) != 3:
    sys.exit("usage: ggml_gpt2_export.py CHECKPOINT.h5 OUT.bin")
f = h5py.File(sys.argv[1], "r")


def model(name):
    return np.asarray(f["model/model." + name], dtype=np.float32)


vocab, d_model = f["model/model.embed_tokens.weight"].shape
n_ctx = f["model/model.embed_positions.weight"].shape[0]
n_layer = len({k.split(".")[2] for k in f["model"] if k.startswith("model.layers.")})
n_head = d_model // 64  # gpt2-small's head size
with open(sys.argv[2], "wb") as out:
    out.write(struct.pack("iiiiiii", 0x67676D6C, vocab, n_ctx, d_model, n_head, n_layer, 0))
    out.write(struct.pack("i", vocab))
    for i in range(vocab):
        token = bytes([i]) if i < 256 else b"tok%d" % i
        out.write(struct.pack("i", len(token)) + token)

    def put(name, a):
        a = np.ascontiguousarray(a, dtype=np.float32)
        out.write(struct.pack("iii", a.ndim, len(name), 0))
        for d in reversed(a.shape):
            out.write(struct.pack("i", d))
        out.write(name.encode())
        a.tofile(out)

    put("model/ln_f/g", model("norm.weight"))
    put("model/ln_f/b", model("norm.bias"))
    put("model/wte", model("embed_tokens.weight"))
    put("model/wpe", model("embed_positions.weight"))
    put("model/lm_head", model("embed_tokens.weight"))
    for layer in range(n_layer):
        p, h = f"layers.{layer}.", f"model/h{layer}/"
        put(h + "ln_1/g", model(p + "input_layernorm.weight"))
        put(h + "ln_1/b", model(p + "input_layernorm.bias"))
        put(h + "ln_2/g", model(p + "post_attention_layernorm.weight"))
        put(h + "ln_2/b", model(p + "post_attention_layernorm.bias"))
        attn = p + "self_attn."
        put(h + "attn/c_attn/w", np.concatenate([model(attn + x + "_proj.weight") for x in "qkv"]))
        put(h + "attn/c_attn/b", np.concatenate([model(attn + x + "_proj.bias") for x in "qkv"]))
        put(h + "attn/c_proj/w", model(attn + "o_proj.weight"))
        put(h + "attn/c_proj/b", model(attn + "o_proj.bias"))
        put(h + "mlp/c_fc/w", model(p + "mlp.up_proj.weight"))
        put(h + "mlp/c_fc/b", model(p + "mlp.up_proj.bias"))
        put(h + "mlp/c_proj/w", model(p + "mlp.down_proj.weight"))
        put(h + "mlp/c_proj/b", model(p + "mlp.down_proj.bias"))
