// llama.cpp's one-stream decode speed on GGUF files (node-llama-cpp's prebuilt CPU binary):
// per file and thread count, the best of RUNS runs of prefilling PROMPT_TOKENS tokens then
// timing DECODE tokens of greedy decoding (end-of-generation tokens ignored), as tokens/s.
// Usage: node bench/llama_cpp_decode.mjs NODE_MODULES_DIR [--threads 1,2] [--runs 3]
//          [--decode 128] FILE.gguf...    (bench_llama_cpp_decode.sh runs it; prints JSON lines)
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const modules = args.shift();
const opt = { threads: '1,2', runs: '3', decode: '128' };
const files = [];
while (args.length) {
  const a = args.shift();
  if (a.startsWith('--')) opt[a.slice(2)] = args.shift();
  else files.push(a);
}
const require = createRequire(join(resolve(modules), 'package.json'));
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(require.resolve('node-llama-cpp')).href);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
const decode = Number(opt.decode);

async function oneRun(model, threads) {
  const context = await model.createContext({ contextSize: 512, threads });
  try {
    const prompt = model.tokenize('The quick brown fox jumps over the lazy dog. '.repeat(4));
    let n = 0, start = 0;
    for await (const token of context.getSequence().evaluate(prompt, { temperature: 0 })) {
      void token;
      if (n === 0) start = performance.now();  // first token: prefill done
      if (++n === decode + 1) break;
    }
    return decode / ((performance.now() - start) / 1000);
  } finally {
    await context.dispose();
  }
}

for (const file of files) {
  const model = await llama.loadModel({ modelPath: file });
  for (const threads of opt.threads.split(',').map(Number)) {
    const runs = [];
    for (let r = 0; r < Number(opt.runs); r++) runs.push(await oneRun(model, threads));
    console.log(JSON.stringify({ file, threads, decode_tokens: decode, best_tokens_per_s: Math.max(...runs),
      runs_tokens_per_s: runs.map((x) => Math.round(x * 10) / 10) }));
  }
  await model.dispose();
}
await llama.dispose();
