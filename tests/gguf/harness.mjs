// Shared by the GGUF tests (run through run.sh): the work folder setup.sh filled, the exported files
// and their configs, the npm packages imported from the build tree, and `ember generate`.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

export const EMBER = process.env.EMBER_BINARY;
export const WORK = process.env.EMBER_GGUF_WORK;
assert.ok(EMBER && WORK, 'run through tests/gguf/run.sh (EMBER_BINARY and EMBER_GGUF_WORK)');
// Each tiny model setup.sh trains, and the GGUF architecture its config exports as.
export const MODELS = { qwen3: 'qwen3', llama: 'llama', gpt2: 'gpt2', qwen3moe: 'qwen3moe', llamamoe: 'llama' };
export const ARCHS = Object.keys(MODELS);
export const WEIGHTS = ['float32', 'bf16', 'int8'];

// A package of WORK/node, imported by path (a bare name resolves from this file's folder).
const requireFromWork = createRequire(join(WORK, 'node', 'package.json'));
export async function importPackage(name) {
  return import(pathToFileURL(requireFromWork.resolve(name)).href);
}

export const config = (arch) => JSON.parse(readFileSync(join(WORK, `${arch}.json`), 'utf8'));
export const checkpoint = (arch) =>
  join(WORK, arch, readFileSync(join(WORK, arch, 'latest'), 'utf8').trim());
export const ggufPath = (arch, weights) => join(WORK, `${arch}.${weights}.gguf`);

// `ember generate --top-k 1`: the greedy continuation of prompt (ember prints the prompt first).
export async function emberGreedy(arch, prompt, maxTokens) {
  const { stdout } = await promisify(execFile)(EMBER, ['generate', '--checkpoint', checkpoint(arch), '--prompt',
    prompt, '--top-k', '1', '--max-tokens', String(maxTokens)], { env: { ...process.env, OMP_NUM_THREADS: '1' } });
  assert.ok(stdout.startsWith(prompt), `ember generate prints the prompt first: ${JSON.stringify(stdout)}`);
  return stdout.slice(prompt.length).replace(/\n$/, '');
}
