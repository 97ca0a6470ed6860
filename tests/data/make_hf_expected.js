// Writes the Hugging Face fixtures (npm install @anush008/tokenizers first):
//   hf_trained.tokenizer.json   trained by the HF library on small_corpus.txt
//                               (its default BpeTrainer), <|endoftext|> added after
//   hf_trained_expected.json    HF's ids with that file for the text set
//   ember_trained_hf_ids.json   HF's ids with ember_trained.tokenizer.json, a file
//                               ember writes (EMBER_UPDATE_FIXTURES=1 test_tokenizer_hf)
//   EMBER_HF_MODULE=SCRATCH/node_modules/@anush008/tokenizers node tests/data/make_hf_expected.js
const fs = require('fs');
const path = require('path');
const { texts } = require('./parity_texts.js');
const { load_tokenizers, encode_all, write_cases } = require('./hf_encode.js');

const { Tokenizer } = load_tokenizers();
const here = __dirname;
const extra = [  // whitespace classes where JavaScript's \s and GPT-2's differ, and added tokens
  'next line\u0085here, bom\ufeffhere, nbsp\u00a0here',
  'doc one<|endoftext|>doc two <|endoftext|><|endoftext|> three',
  '\u0085\u0085x \u0085 \u2028y',
].map((t, i) => ({ name: `hf extra ${i}`, bytes: Buffer.from(t, 'utf8') }));
const cases = texts.concat(extra).map(({ name, bytes }) => ({ name, hex: bytes.toString('hex') }));

async function main() {
  const bl = (prefix, trim) => ({ type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: trim, use_regex: true });
  const empty = {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: bl(false, true), post_processor: bl(true, false), decoder: bl(true, true),
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {}, merges: [] },
  };
  const hf = Tokenizer.fromString(JSON.stringify(empty));
  hf.train([path.join(here, 'small_corpus.txt')]);
  hf.addSpecialTokens(['<|endoftext|>']);
  hf.save(path.join(here, 'hf_trained.tokenizer.json'), true);
  write_cases(path.join(here, 'hf_trained_expected.json'), await encode_all(hf, cases));

  const ember_file = path.join(here, 'ember_trained.tokenizer.json');
  const ember = Tokenizer.fromFile(ember_file);
  write_cases(path.join(here, 'ember_trained_hf_ids.json'), await encode_all(ember, cases));
  console.log('wrote hf_trained.tokenizer.json, hf_trained_expected.json, ember_trained_hf_ids.json');
}
main().catch(e => { console.error(e); process.exit(1); });
