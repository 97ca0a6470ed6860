// Writes gpt2_expected.json: OpenAI GPT-2 ids for the parity text set, made by
// the npm package gpt-3-encoder (a port of OpenAI's encoder.py).
//   npm install gpt-3-encoder      (in a scratch directory)
//   node tests/data/make_gpt2_expected.js SCRATCH/node_modules/gpt-3-encoder
// Texts that are not valid UTF-8 are decoded the way Python's surrogateescape
// does (each bad byte becomes U+DC80+byte, which the pattern treats as neither
// letter, number nor space), split with GPT-2's pattern and encoded back byte
// for byte: the ids OpenAI's encoder gives for such a string.
const fs = require('fs');
const path = require('path');
const { texts } = require('./parity_texts.js');

const dir = process.argv[2];
if (!dir) throw new Error('usage: node make_gpt2_expected.js PATH/TO/gpt-3-encoder');
const source = fs.readFileSync(path.join(dir, 'Encoder.js'), 'utf8') +
  '\nmodule.exports.internals = { bpe, byte_encoder, encoder, pat };\n';
const mod = { exports: {} };
new Function('module', 'exports', 'require', '__dirname', source)(mod, mod.exports, require, dir);
const { encode } = mod.exports;
const { bpe, byte_encoder, encoder, pat } = mod.exports.internals;

// Strict UTF-8 decoding with surrogateescape for the bytes that do not fit.
function decode_escaped(buf) {
  let out = '';
  for (let i = 0; i < buf.length;) {
    const b0 = buf[i];
    let len = 0, cp = 0;
    const cont = k => i + k < buf.length && (buf[i + k] & 0xc0) === 0x80;
    if (b0 < 0x80) { len = 1; cp = b0; }
    else if (b0 >= 0xc2 && b0 <= 0xdf && cont(1)) { len = 2; cp = ((b0 & 0x1f) << 6) | (buf[i + 1] & 0x3f); }
    else if (b0 >= 0xe0 && b0 <= 0xef && cont(1) && cont(2)) {
      cp = ((b0 & 0x0f) << 12) | ((buf[i + 1] & 0x3f) << 6) | (buf[i + 2] & 0x3f);
      if (cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff)) len = 3;
    } else if (b0 >= 0xf0 && b0 <= 0xf4 && cont(1) && cont(2) && cont(3)) {
      cp = ((b0 & 0x07) << 18) | ((buf[i + 1] & 0x3f) << 12) | ((buf[i + 2] & 0x3f) << 6) | (buf[i + 3] & 0x3f);
      if (cp >= 0x10000 && cp <= 0x10ffff) len = 4;
    }
    if (len === 0) { out += String.fromCharCode(0xdc00 + b0); i += 1; }
    else { out += String.fromCodePoint(cp); i += len; }
  }
  return out;
}

function encode_escaped(text) {
  const ids = [];
  for (const m of text.matchAll(pat)) {
    const bytes = [];
    for (const ch of m[0]) {
      const cp = ch.codePointAt(0);
      if (cp >= 0xdc80 && cp <= 0xdcff) bytes.push(cp - 0xdc00);
      else bytes.push(...Buffer.from(ch, 'utf8'));
    }
    const word = bytes.map(x => byte_encoder[x]).join('');
    for (const t of bpe(word).split(' ')) ids.push(encoder[t]);
  }
  return ids;
}

const out = texts.map(({ name, bytes }) => {
  const text = decode_escaped(bytes);
  const ids = encode_escaped(text);
  if (Buffer.from(text, 'utf8').equals(bytes)) {  // valid UTF-8: the package's own encode must agree
    const ref = encode(text);
    if (JSON.stringify(ref) !== JSON.stringify(ids)) throw new Error(`mismatch with encode() on ${name}`);
  }
  if (ids.some(x => x === undefined)) throw new Error(`unknown token in ${name}`);
  return { name, hex: bytes.toString('hex'), ids };
});
const dest = path.join(__dirname, 'gpt2_expected.json');
fs.writeFileSync(dest, '[\n' + out.map(o => '  ' + JSON.stringify(o)).join(',\n') + '\n]\n');
console.log(`wrote ${out.length} texts to ${dest}`);
