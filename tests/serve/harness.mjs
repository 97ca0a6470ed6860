// Shared by the serve tests: the OpenAI client installed in the build tree, `ember serve` started on
// port 0 (its printed URL read back) and stopped with SIGTERM, `ember generate` runs for reference
// outputs and prompt token counts, /metrics lookups and raw socket requests.
// Environment (tests/serve/run.sh): EMBER_BINARY, EMBER_SERVE_WORK (setup.sh's folder).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const EMBER = process.env.EMBER_BINARY;
const WORK = process.env.EMBER_SERVE_WORK;
assert.ok(EMBER && WORK, 'run through tests/serve/run.sh (EMBER_BINARY and EMBER_SERVE_WORK)');
export const CHECKPOINT = join(WORK, 'run', readFileSync(join(WORK, 'run', 'latest'), 'utf8').trim());
export const CONTEXT = JSON.parse(readFileSync(join(WORK, 'tiny.json'), 'utf8')).max_seq_len;

// The package's ESM entry, imported by path (bare 'openai' resolves from this file's folder, not the build's).
async function loadOpenAI() {
  const dir = join(WORK, 'node', 'node_modules', 'openai');
  const entry = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).exports['.'];
  const file = typeof entry === 'string' ? entry : (entry.import?.default ?? entry.import ?? entry.default);
  return (await import(pathToFileURL(join(dir, file)).href)).default;
}
export const OpenAI = await loadOpenAI();

const running = new Set();
process.on('exit', () => { for (const p of running) p.kill('SIGKILL'); });

// Starts `ember serve --checkpoint CHECKPOINT --port 0 ARGS` and waits for its "listening on URL" line.
export async function startServer(args = []) {
  const proc = spawn(EMBER, ['serve', '--checkpoint', CHECKPOINT, '--port', '0', ...args],
                     { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(proc);
  let output = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => {
    running.delete(proc);
    resolve({ code, signal });
  }));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ember serve printed no URL in 30 s:\n${output}`)), 30000);
    const look = (chunk) => {
      output += chunk;
      const m = output.match(/listening on (http:\/\/[^\s]+)/);
      if (m) { clearTimeout(timer); resolve(m[1].replace(/\/$/, '')); }
    };
    proc.stdout.setEncoding('utf8').on('data', look);
    proc.stderr.setEncoding('utf8').on('data', look);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`ember serve ${args.join(' ')} exited (${code ?? signal}) before listening:\n${output}`));
    });
  });
  return {
    url,
    proc,
    output: () => output,
    client: (options = {}) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000,
                                           ...options }),
    // SIGTERM; resolves with the exit code and the milliseconds it took (SIGKILL after 10 s, then fails).
    async stop() {
      const start = Date.now();
      proc.kill('SIGTERM');
      let timer;
      const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), 10000); });
      const result = await Promise.race([exited, late]);
      clearTimeout(timer);
      if (result === null) {
        proc.kill('SIGKILL');
        assert.fail(`ember serve did not exit within 10 s of SIGTERM:\n${output}`);
      }
      return { ...result, ms: Date.now() - start };
    },
  };
}

// Stops a server and checks SIGTERM's contract: exit code 0 within 10 s.
export async function stopServer(server) {
  const { code, signal, ms } = await server.stop();
  assert.equal(signal, null, `ember serve was killed by ${signal}:\n${server.output()}`);
  assert.equal(code, 0, `ember serve exited ${code} after SIGTERM:\n${server.output()}`);
  assert.ok(ms < 10000, `exit took ${ms} ms`);
}

function run(args) {
  return new Promise((resolve, reject) => {
    execFile(EMBER, args, { encoding: 'utf8', maxBuffer: 1 << 24 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`ember ${args.join(' ')}: ${error.message}\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

// `ember generate --top-k 1` on the prompt (with chat: as a ChatML user message): the generated text
// (stdout holds the prompt's echo without --chat, then the text, then a newline) and the prompt's token
// count (stderr's speed line).
export async function generate(prompt, { maxTokens, chat = false }) {
  const args = ['generate', '--checkpoint', CHECKPOINT, '--prompt', prompt, '--top-k', '1',
                '--max-tokens', String(maxTokens)];
  if (chat) args.push('--chat');
  const { stdout, stderr } = await run(args);
  const echo = chat ? '' : prompt;
  assert.ok(stdout.startsWith(echo) && stdout.endsWith('\n'), `ember generate printed ${JSON.stringify(stdout)}`);
  const count = stderr.match(/prompt (\d+) tokens/);
  assert.ok(count, `no prompt token count in ${stderr}`);
  return { text: stdout.slice(echo.length, -1), promptTokens: Number(count[1]) };
}

// Runs fn over items, `width` at a time.
export async function pooled(items, width, fn) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; results[i] = await fn(items[i], i); } };
  await Promise.all(Array.from({ length: width }, worker));
  return results;
}

// GET /metrics: the Prometheus samples as [{series: 'name{labels}', name, value}].
export async function metrics(url) {
  const response = await fetch(`${url}/metrics`);
  assert.equal(response.status, 200);
  const samples = [];
  for (const line of (await response.text()).split('\n')) {
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m) samples.push({ series: m[1] + (m[2] ?? ''), name: m[1], value: Number(m[3]) });
  }
  return samples;
}

// The sum of the samples whose series matches every pattern (histogram parts left out);
// fails naming the series there are when none matches.
export function metric(samples, ...patterns) {
  const hits = samples.filter((s) => !/_(bucket|sum|count)$/.test(s.name) &&
                                      patterns.every((p) => p.test(s.series)));
  assert.ok(hits.length > 0, `no /metrics series matches ${patterns.join(' and ')}; there are: ` +
                             [...new Set(samples.map((s) => s.name))].join(' '));
  return hits.reduce((sum, s) => sum + s.value, 0);
}

// Polls until check() holds (true) or `ms` pass; returns its last value.
export async function eventually(check, ms = 5000) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value === true || Date.now() > end) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Sends raw bytes to the server (`chunks`: strings or Buffers, written in order while the socket is
// open) and resolves after the server closes the connection or `waitMs` pass with
// {status (of the first response line, or null), closed, bytes}.
export function rawRequest(url, chunks, waitMs) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let received = '';
    let done = false;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const m = received.match(/^HTTP\/1\.[01] (\d{3})/);
      resolve({ status: m ? Number(m[1]) : null, closed, bytes: received.length });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (d) => { received += d.toString('latin1'); });
    socket.on('close', () => finish(true));
    socket.on('error', () => {});
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        if (done || socket.destroyed) return;
        if (!socket.write(chunk)) {
          await new Promise((resolve) => {
            const go = () => { socket.off('drain', go); socket.off('close', go); resolve(); };
            socket.on('drain', go);
            socket.on('close', go);
          });
        }
      }
    });
  });
}

// Awaits a client call that must fail with the client's typed error `type` and HTTP `status`; checks
// the OpenAI error shape {error: {message, type, param, code}} and returns the error.
export async function rejectsWith(promise, type, status, what) {
  try {
    const value = await promise;
    assert.fail(`${what}: expected HTTP ${status}, got success ${JSON.stringify(value).slice(0, 300)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    assert.ok(e instanceof type, `${what}: expected ${type.name} (${status}), got ${e?.constructor?.name}: ${e?.message}`);
    assert.equal(e.status, status, what);
    assert.equal(typeof e.error?.message, 'string', `${what}: error.message in ${JSON.stringify(e.error)}`);
    assert.ok(e.error.message.length > 0, `${what}: an empty error message`);
    assert.equal(typeof e.error.type, 'string', `${what}: error.type in ${JSON.stringify(e.error)}`);
    assert.ok('param' in e.error && 'code' in e.error, `${what}: error.param and error.code in ${JSON.stringify(e.error)}`);
    return e;
  }
}
