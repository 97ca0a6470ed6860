// Every exported file read by @huggingface/gguf (an independent parser): the architecture's keys with
// the config's values, the tokenizer's keys, and the exact set of tensors with their shapes and types,
// derived here from the config (llama.cpp's converter's names and ggml's innermost-first shapes).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ARCHS, MODELS, WEIGHTS, config, ggufPath, importPackage } from './harness.mjs';

const { gguf } = await importPackage('@huggingface/gguf');
const F32 = 0, Q8_0 = 8, BF16 = 30;

// name -> [shape, is a matrix (stored in the chosen type)] for a config.
function expectedTensors(arch, c) {
  const d = c.d_model, V = c.vocab_size, hd = d / c.n_heads, kv = c.n_kv_heads ?? c.n_heads;
  const m = c.ffn_hidden ?? 4 * d, ctx = c.max_seq_len;
  const t = { 'token_embd.weight': [[d, V], true], 'output_norm.weight': [[d], false] };
  if (c.tie_embeddings === false) t['output.weight'] = [[d, V], true];
  if (arch === 'gpt2') {
    t['position_embd.weight'] = [[d, ctx], false];
    t['output_norm.bias'] = [[d], false];
  }
  for (let i = 0; i < c.n_layers; i++) {
    const b = `blk.${i}.`;
    t[b + 'attn_norm.weight'] = [[d], false];
    t[b + 'ffn_norm.weight'] = [[d], false];
    t[b + 'attn_output.weight'] = [[c.n_heads * hd, d], true];
    t[b + 'ffn_up.weight'] = [[d, m], true];
    t[b + 'ffn_down.weight'] = [[m, d], true];
    if (arch === 'gpt2') {
      t[b + 'attn_qkv.weight'] = [[d, d + 2 * kv * hd], true];
      t[b + 'attn_qkv.bias'] = [[d + 2 * kv * hd], false];
      for (const n of ['attn_norm', 'ffn_norm']) t[b + n + '.bias'] = [[d], false];
      t[b + 'attn_output.bias'] = [[d], false];
      t[b + 'ffn_up.bias'] = [[m], false];
      t[b + 'ffn_down.bias'] = [[d], false];
      continue;
    }
    if (c.moe) {
      const E = c.moe.n_experts, me = c.moe.expert_hidden;
      delete t[b + 'ffn_up.weight'];
      delete t[b + 'ffn_down.weight'];
      t[b + 'ffn_gate_inp.weight'] = [[d, E], false];
      t[b + 'ffn_gate_exps.weight'] = [[d, me, E], true];
      t[b + 'ffn_up_exps.weight'] = [[d, me, E], true];
      t[b + 'ffn_down_exps.weight'] = [[me, d, E], true];
    } else {
      t[b + 'ffn_gate.weight'] = [[d, m], true];
    }
    t[b + 'attn_q.weight'] = [[d, c.n_heads * hd], true];
    t[b + 'attn_k.weight'] = [[d, kv * hd], true];
    t[b + 'attn_v.weight'] = [[d, kv * hd], true];
    if (c.qk_norm) {
      t[b + 'attn_q_norm.weight'] = [[hd], false];
      t[b + 'attn_k_norm.weight'] = [[hd], false];
    }
  }
  return t;
}

function expectedType(weights, matrix, shape) {
  if (!matrix || weights === 'float32') return F32;
  if (weights === 'bf16') return BF16;
  return shape[0] % 32 === 0 ? Q8_0 : F32;
}

for (const name of ARCHS) {
  const arch = MODELS[name];
  for (const weights of WEIGHTS) {
    test(`${name} ${weights}: keys and tensors read back by @huggingface/gguf`, async () => {
      const c = config(name);
      const { metadata: md, tensorInfos } = await gguf(ggufPath(name, weights), { allowLocalFile: true });
      assert.equal(md.version, 3);
      assert.equal(md['general.architecture'], arch);
      assert.equal(md['general.alignment'], 32);
      assert.equal(md['general.file_type'], { float32: 0, bf16: 32, int8: 7 }[weights]);
      const kv = c.n_kv_heads ?? c.n_heads;
      assert.equal(md[`${arch}.context_length`], c.max_seq_len);
      assert.equal(md[`${arch}.embedding_length`], c.d_model);
      assert.equal(md[`${arch}.block_count`], c.n_layers);
      assert.equal(md[`${arch}.feed_forward_length`], c.moe ? c.moe.expert_hidden : c.ffn_hidden ?? 4 * c.d_model);
      if (c.moe) {
        assert.equal(md[`${arch}.expert_count`], c.moe.n_experts);
        assert.equal(md[`${arch}.expert_used_count`], c.moe.top_k);
        assert.equal(md[`${arch}.expert_feed_forward_length`], c.moe.expert_hidden);
      }
      assert.equal(md[`${arch}.attention.head_count`], c.n_heads);
      assert.equal(md[`${arch}.attention.head_count_kv`], kv);
      assert.equal(md[`${arch}.vocab_size`], c.vocab_size);
      if (arch === 'gpt2') {
        assert.ok(Math.abs(md['gpt2.attention.layer_norm_epsilon'] - 1e-5) < 1e-10);
      } else {
        assert.ok(Math.abs(md[`${arch}.attention.layer_norm_rms_epsilon`] - 1e-5) < 1e-10);
        assert.equal(md[`${arch}.rope.freq_base`], 10000);
        assert.equal(md[`${arch}.rope.dimension_count`], c.d_model / c.n_heads);
      }
      assert.equal(md['tokenizer.ggml.model'], 'gpt2');
      assert.equal(md['tokenizer.ggml.pre'], 'gpt-2');
      assert.equal(md['tokenizer.ggml.tokens'].length, c.vocab_size);
      assert.equal(md['tokenizer.ggml.token_type'].length, c.vocab_size);
      assert.equal(md['tokenizer.ggml.merges'].length, c.vocab_size - 256 - 3);  // bytes, merges, 3 specials
      const eot = md['tokenizer.ggml.tokens'].indexOf('<|endoftext|>');
      assert.equal(md['tokenizer.ggml.eos_token_id'], eot);
      assert.equal(md['tokenizer.ggml.token_type'][eot], 3);
      assert.equal(md['tokenizer.ggml.eot_token_id'], md['tokenizer.ggml.tokens'].indexOf('<|im_end|>'));
      assert.match(md['tokenizer.chat_template'], /<\|im_start\|>assistant\\n/);
      const want = expectedTensors(arch, c);
      assert.deepEqual(tensorInfos.map((t) => t.name).sort(), Object.keys(want).sort());
      for (const t of tensorInfos) {
        const [shape, matrix] = want[t.name];
        assert.deepEqual(t.shape.map(Number), shape, t.name);
        assert.equal(t.dtype, expectedType(weights, matrix, shape), t.name);
      }
    });
  }
}
