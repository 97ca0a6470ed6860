// `ember serve` under load through the official JS client (docs/cli.md#serving): 16 concurrent
// greedy streams (completions and chat) each equal `ember generate --top-k 1` on its prompt (batch
// invariance); a prompt sharing a long prefix with an earlier one raises the prefix-cache hits in
// /metrics; a client that disconnects mid-stream frees its sequence and KV blocks; a full queue answers
// 429 while the admitted requests complete; SIGTERM with a stream in flight still exits 0 within 10 s.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { OpenAI, eventually, generate, metric, metrics, pooled, rejectsWith, startServer, stopServer }
  from './harness.mjs';

const NAMES = ['Ada', 'Bob', 'Cleo', 'Dan', 'Eve', 'Finn', 'Gus', 'Hal'];
const VERBS = ['sees', 'helps', 'calls', 'meets', 'finds', 'likes', 'sees', 'helps'];
const MAX_TOKENS = 24;
const RUNNING = /^ember_requests_running$/;
const KV_USED = /^ember_kv_blocks_used$/;
const CANCELLED = /^ember_requests_finished_total\{reason="cancelled"\}$/;
const count = (samples, pattern) => samples.filter((s) => pattern.test(s.series)).reduce((n, s) => n + s.value, 0);
// 16 different prompts: even ones completions, odd ones chat messages.
const CASES = Array.from({ length: 16 }, (_, i) => ({
  chat: i % 2 === 1,
  prompt: i % 2 === 0 ? `${NAMES[i / 2]} ${VERBS[(i / 2 + 3) % 8]}` : `${NAMES[(i + 5) % 8]} ${VERBS[(i - 1) / 2]} a`,
}));

// The text of one streamed request and its usage chunk.
async function streamed(client, model, { chat, prompt }) {
  const common = { model, max_tokens: MAX_TOKENS, temperature: 0, stream: true,
                   stream_options: { include_usage: true } };
  const stream = chat
    ? await client.chat.completions.create({ ...common, messages: [{ role: 'user', content: prompt }] })
    : await client.completions.create({ ...common, prompt });
  let text = '', usage = null, chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (choice) text += (chat ? choice.delta.content : choice.text) ?? '';
  }
  return { text, usage, chunks };
}

describe('ember serve under load', () => {
  let server, client, model, references;

  before(async () => {
    [server, references] = await Promise.all([
      startServer(),
      pooled(CASES, 2, (c) => generate(c.prompt, { maxTokens: MAX_TOKENS, chat: c.chat })),
    ]);
    client = server.client();
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    assert.equal(models.length, 1);
    [model] = models;
  });
  after(async () => { if (server) await stopServer(server); });

  test('16 concurrent greedy streams each equal ember generate --top-k 1', async () => {
    const results = await Promise.all(CASES.map((c) => streamed(client, model, c)));
    results.forEach((r, i) => {
      const what = `${CASES[i].chat ? 'chat' : 'completion'} ${JSON.stringify(CASES[i].prompt)}`;
      assert.equal(r.text, references[i].text, what);
      assert.equal(r.usage?.prompt_tokens, references[i].promptTokens, `${what}: prompt_tokens`);
      // 0 tokens only when the model's first token ends the text (the reference is then empty too).
      assert.ok(r.usage.completion_tokens <= MAX_TOKENS && (r.usage.completion_tokens > 0 || r.text === ''), what);
    });
    const distinct = new Set(references.map((r) => r.text));
    assert.ok(distinct.size >= 8, `the reference outputs should differ (${distinct.size} distinct)`);
  });

  test('a prompt sharing a long prefix with an earlier one raises the prefix-cache hits', async () => {
    const hits = async () => metric(await metrics(server.url), /^ember_prefix_cache_hits_total$/);
    const history = 'Cleo meets the old mill. Dan finds a green kite. Eve likes the tall tree. ' +
                    'Finn calls a blue cup. Gus helps the red boat. Hal sees a small dog.\n';
    const first = await client.completions.create({ model, prompt: history + 'Ada', max_tokens: 2, temperature: 0 });
    assert.ok(first.usage.prompt_tokens >= 40, `history of ${first.usage.prompt_tokens} tokens (want >= 40)`);
    const before = await hits();
    await client.completions.create({ model, prompt: history + 'Bob likes', max_tokens: 2, temperature: 0 });
    const afterCompletion = await hits();
    assert.ok(afterCompletion > before, `prefix-cache hits ${before} -> ${afterCompletion}`);
    // A chat's second turn resends the first: its rendered prefix is reused.
    const turn1 = [{ role: 'user', content: history }];
    const reply = await client.chat.completions.create({ model, messages: turn1, max_tokens: 4, temperature: 0 });
    const beforeTurn2 = await hits();
    await client.chat.completions.create({ model, max_tokens: 2, temperature: 0, messages: [
      ...turn1, { role: 'assistant', content: reply.choices[0].message.content }, { role: 'user', content: 'And?' }] });
    const afterTurn2 = await hits();
    assert.ok(afterTurn2 > beforeTurn2, `prefix-cache hits over a chat's second turn ${beforeTurn2} -> ${afterTurn2}`);
  });

  test('a client that disconnects mid-stream frees its sequence and KV blocks', async () => {
    const idle = await metrics(server.url);
    assert.equal(metric(idle, RUNNING), 0, 'nothing runs before');
    const baseline = metric(idle, KV_USED);
    const cancelledBefore = count(idle, CANCELLED);
    const abort = new AbortController();
    const stream = await client.completions.create(
      { model, prompt: 'Ada', max_tokens: 1000, temperature: 0, stream: true },
      { signal: abort.signal });
    let chunks = 0;
    try {
      for await (const chunk of stream) {
        assert.equal(chunk.object, 'text_completion');
        if (++chunks === 2) abort.abort();
      }
    } catch (e) {
      assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', `${e?.constructor?.name}: ${e}`);
    }
    // The stream is cut after 2 of its 1000 tokens (the context is 1024, so the server is still
    // generating when the client goes): the generation is cancelled, the sequence leaves
    // the batch and its blocks are freed (the prompt is under one block, so nothing stays cached).
    const settled = await eventually(async () => {
      const m = await metrics(server.url);
      const now = { running: metric(m, RUNNING), used: metric(m, KV_USED), cancelled: count(m, CANCELLED) };
      return (now.running === 0 && now.used === baseline && now.cancelled === cancelledBefore + 1) ||
             `${JSON.stringify(now)}; want running 0, used ${baseline} (as before), cancelled ${cancelledBefore + 1}`;
    });
    assert.equal(settled, true, settled);
    // The server goes on serving.
    const r = await client.completions.create({ model, prompt: 'Bob', max_tokens: 2, temperature: 0 });
    assert.equal(r.choices.length, 1);
  });
});

describe('ember serve --max-seqs 1 --max-queue 1', () => {
  let server, client;
  before(async () => {
    server = await startServer(['--max-seqs', '1', '--max-queue', '1', '--served-name', 'small']);
    client = server.client();
  });
  after(async () => { if (server) await stopServer(server); });

  test('a flood of concurrent requests: some 429, every other one completes', async (t) => {
    const ask = (i) => client.completions.create({ model: 'small', prompt: `${NAMES[i % 8]} sees`, max_tokens: 60,
                                                   temperature: 0 })
      .then((r) => ({ ok: r }), (e) => ({ error: e }));
    const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => ask(i)));
    const limited = outcomes.filter((o) => o.error);
    for (const { error } of limited) {
      await rejectsWith(Promise.reject(error), OpenAI.RateLimitError, 429, 'a request past the queue');
    }
    assert.ok(limited.length >= 1, 'no 429 among 12 concurrent requests with one seat and one queue place');
    const done = outcomes.filter((o) => o.ok);
    t.diagnostic(`${limited.length} answered 429, ${done.length} completed`);
    assert.ok(done.length >= 1, 'no request completed');
    for (const { ok } of done) assert.ok(ok.usage.completion_tokens > 0);
  });

  test('SIGTERM with a stream in flight: the stream ends and the server exits 0 within 10 s', async () => {
    const stream = await client.completions.create({ model: 'small', prompt: 'Ada', max_tokens: 1000,
                                                     temperature: 0, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    const ended = (async () => {
      try { for (let step = await iterator.next(); !step.done; step = await iterator.next()); return 'ended'; }
      catch (e) { return `failed: ${e.message}`; }
    })();
    const s = server;
    server = null;
    await stopServer(s);
    const outcome = await Promise.race([ended, new Promise((r) => setTimeout(() => r('still open'), 5000))]);
    assert.notEqual(outcome, 'still open', 'the stream stayed open after the server exited');
  });
});
