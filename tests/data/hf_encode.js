// Encodes texts with the Hugging Face tokenizers library (its node binding,
// npm package @anush008/tokenizers) from a tokenizer.json.
//   node hf_encode.js TOKENIZER_JSON TEXTS_JSON OUT_JSON
// TEXTS_JSON: [{"name", "hex"}]; OUT_JSON gets [{"name", "hex", "ids"}] for the
// texts that are valid UTF-8 (JavaScript strings cannot hold the others).
// The package is found through $EMBER_HF_MODULE (its folder) or require().
const fs = require('fs');

function load_tokenizers() {
  const dir = process.env.EMBER_HF_MODULE;
  return require(dir ? dir : '@anush008/tokenizers');
}

async function encode_all(tokenizer, texts) {
  const out = [];
  for (const { name, hex } of texts) {
    const bytes = Buffer.from(hex, 'hex');
    const text = bytes.toString('utf8');
    if (!Buffer.from(text, 'utf8').equals(bytes)) continue;
    const enc = await tokenizer.encode(text, null, { addSpecialTokens: false });
    out.push({ name, hex, ids: enc.getIds() });
  }
  return out;
}

function write_cases(path, cases) {
  fs.writeFileSync(path, '[\n' + cases.map(c => '  ' + JSON.stringify(c)).join(',\n') + '\n]\n');
}

module.exports = { load_tokenizers, encode_all, write_cases };

if (require.main === module) {
  const [tok_path, texts_path, out_path] = process.argv.slice(2);
  const { Tokenizer } = load_tokenizers();
  const tokenizer = Tokenizer.fromFile(tok_path);
  encode_all(tokenizer, JSON.parse(fs.readFileSync(texts_path, 'utf8')))
    .then(cases => write_cases(out_path, cases))
    .catch(e => { console.error(e); process.exit(1); });
}
