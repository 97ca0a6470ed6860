// Each exported file loaded by llama.cpp itself (node-llama-cpp's prebuilt CPU binary, never built
// here): its greedy continuation of a few prompts against `ember generate --top-k 1` on the checkpoint.
// float32 must give the same text; bf16 and int8 round the weights, so the test reports where the
// texts part and requires the first tokens to agree.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ARCHS, WEIGHTS, emberGreedy, ggufPath, importPackage } from './harness.mjs';

const { getLlama, LlamaLogLevel } = await importPackage('node-llama-cpp');
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
after(() => llama.dispose());

const PROMPTS = ['Ada sees', 'Finn likes the', 'The quick brown'];
const MAX_TOKENS = 20;
// bf16 and int8 (against ember's float32 weights): tokens that must match before the texts may part
// (measured: all 20 agree, except qwen3moe bf16 on one prompt, after 4: a near-tie in the routing).
const MIN_AGREED = 3;

// llama.cpp's greedy tokens after prompt (stopping at an end-of-generation token), each as text.
async function llamaGreedy(model, prompt) {
  // F32 keys and values (llama.cpp's default cache is F16; ember's generate keeps float32).
  const context = await model.createContext({ contextSize: 128, threads: 1, experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32' });
  try {
    const sequence = context.getSequence();
    const pieces = [];
    for await (const token of sequence.evaluate(model.tokenize(prompt), { temperature: 0 })) {
      if (model.isEogToken(token) || pieces.length === MAX_TOKENS) break;
      pieces.push(model.detokenize([token]));
    }
    return pieces;
  } finally {
    await context.dispose();
  }
}

// How many of llama.cpp's tokens spell a prefix of ember's text.
function agreedTokens(pieces, text) {
  let n = 0, at = 0;
  while (n < pieces.length && text.startsWith(pieces[n], at)) at += pieces[n++].length;
  return n;
}

const ember = {};
for (const arch of ARCHS) {
  for (const weights of WEIGHTS) {
    test(`${arch} ${weights}: llama.cpp's greedy text against ember generate --top-k 1`, async () => {
      const model = await llama.loadModel({ modelPath: ggufPath(arch, weights) });
      try {
        for (const prompt of PROMPTS) {
          ember[arch + prompt] ??= await emberGreedy(arch, prompt, MAX_TOKENS);
          const want = ember[arch + prompt];
          const pieces = await llamaGreedy(model, prompt);
          const got = pieces.join('');
          const agreed = agreedTokens(pieces, want);
          console.log(`${arch} ${weights} ${JSON.stringify(prompt)}: ${agreed === pieces.length && got === want
            ? `same ${pieces.length} tokens` : `parts after ${agreed} tokens`}: ember ${JSON.stringify(want)}, ` +
            `llama.cpp ${JSON.stringify(got)}`);
          if (weights === 'float32') {
            assert.equal(got, want, `${arch} float32, prompt ${JSON.stringify(prompt)}`);
          } else {
            assert.ok(agreed >= Math.min(MIN_AGREED, pieces.length), `${arch} ${weights}: only ${agreed} tokens agree`);
          }
        }
      } finally {
        await model.dispose();
      }
    });
  }
}
