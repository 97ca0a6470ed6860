// The Hugging Face tokenizers library (npm @anush008/tokenizers, its native
// binding) on the same work as bench_tokenizer: BPE training on the corpus
// files (its default BpeTrainer: vocab 30000, min frequency 0, ByteLevel) and
// encodeBatch throughput on the same documents, plus the compression.
// Threads: set RAYON_NUM_THREADS before starting node (bench_tokenizer.sh does).
//   node bench_tokenizer_hf.js DOCS_JSON [--tokenizer EMBER_TOKENIZER_JSON] FILE...
const fs = require('fs');
const { Tokenizer } = require(process.env.EMBER_HF_MODULE || '@anush008/tokenizers');

function byte_level_bpe() {
  const bl = (p, t) => ({ type: 'ByteLevel', add_prefix_space: p, trim_offsets: t, use_regex: true });
  return Tokenizer.fromString(JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: bl(false, true), post_processor: bl(true, false), decoder: bl(true, true),
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {}, merges: [] },
  }));
}

async function encode_rate(tok, docs, bytes, reps) {
  let best = Infinity, tokens = 0;
  for (let r = 0; r < reps; ++r) {
    const t0 = process.hrtime.bigint();
    const encs = await tok.encodeBatch(docs, { addSpecialTokens: false });
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    best = Math.min(best, s);
    tokens = encs.reduce((n, e) => n + e.getLength(), 0);
  }
  return { rate: bytes / best / 1e6, tokens };
}

async function main() {
  const args = process.argv.slice(2);
  const docs = JSON.parse(fs.readFileSync(args.shift(), 'utf8'));
  let ember_path = null;
  if (args[0] === '--tokenizer') { args.shift(); ember_path = args.shift(); }
  const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);
  const threads = process.env.RAYON_NUM_THREADS || 'all';

  if (args.length > 0) {
    const tok = byte_level_bpe();
    const t0 = process.hrtime.bigint();
    tok.train(args);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`hf train (${threads} threads): vocab ${tok.getVocabSize(true)}: ${s.toFixed(3)} s`);
    const { rate, tokens } = await encode_rate(tok, docs, bytes, 3);
    console.log(`hf encode ${threads} thread(s), HF-trained vocab: ${rate.toFixed(1)} MB/s, ${tokens} tokens, ${(bytes / tokens).toFixed(3)} bytes/token`);
  }
  if (ember_path) {
    const tok = Tokenizer.fromFile(ember_path);
    const { rate, tokens } = await encode_rate(tok, docs, bytes, 3);
    console.log(`hf encode ${threads} thread(s), ember's tokenizer.json: ${rate.toFixed(1)} MB/s, ${tokens} tokens, ${(bytes / tokens).toFixed(3)} bytes/token`);
  }
}
main().catch(e => { console.error(e); process.exit(1); });
