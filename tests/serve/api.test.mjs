// `ember serve`'s OpenAI API through the official JS client (docs/cli.md#serving): models.list, the
// shapes and usage of completions and chat (plain and streamed with include_usage), stop strings,
// echo + logprobs scoring, errors 400/401/404 as the client's typed exceptions, and malformed,
// oversized and half-sent requests answered with a 4xx or a closed connection while the server stays
// up. Every server is stopped with SIGTERM and must exit 0 within 10 s.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { CONTEXT, OpenAI, generate, rawRequest, rejectsWith, startServer, stopServer } from './harness.mjs';

const MODEL = 'tiny-ember';
const PROMPT = 'Ada sees the red boat.\nBob';
const QUESTION = 'Eve likes';  // a user message the tiny model answers with a few words

describe('ember serve, no API key', () => {
  let server, client, reference, chatReference, slow;

  before(async () => {
    server = await startServer(['--served-name', MODEL]);
    client = server.client();
    // A half-sent request held open from the start; it must be closed or answered (a timeout).
    slow = rawRequest(server.url, [`POST /v1/completions HTTP/1.1\r\nHost: ${new URL(server.url).host}\r\n` +
                                   'Content-Type: application/json\r\n'], 30000);
    [reference, chatReference] = await Promise.all([generate(PROMPT, { maxTokens: 12 }),
                                                    generate(QUESTION, { maxTokens: 12, chat: true })]);
  });
  after(async () => { if (server) await stopServer(server); });

  test('GET /health is 200', async () => {
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });

  test('models.list names the served model', async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m);
    assert.deepEqual(models.map((m) => m.id), [MODEL]);
    assert.equal(models[0].object, 'model');
  });

  test('completions: shape, greedy text, usage', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(typeof r.id, 'string');
    assert.ok(Number.isInteger(r.created) && r.created > 1.6e9, `created ${r.created}`);
    assert.equal(r.model, MODEL);
    assert.equal(r.choices.length, 1);
    const [c] = r.choices;
    assert.equal(c.index, 0);
    assert.equal(c.text, reference.text);
    assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
    assert.equal(r.usage.prompt_tokens, reference.promptTokens);
    // 0 only when the model's first token is <|endoftext|> (then the text is empty).
    assert.ok(r.usage.completion_tokens <= 12 && (r.usage.completion_tokens > 0 || c.text === ''));
    if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });

  test('chat: shape, greedy reply, usage', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: QUESTION }], max_tokens: 12, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(typeof r.id, 'string');
    assert.equal(r.model, MODEL);
    const [c] = r.choices;
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.equal(c.message.content, chatReference.text);
    assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
    assert.equal(r.usage.prompt_tokens, chatReference.promptTokens);
    assert.ok(r.usage.completion_tokens <= 12 && (r.usage.completion_tokens > 0 || c.message.content === ''));
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });

  test('usage.prompt_tokens is the same for the same prompt and grows with it', async () => {
    const ask = (prompt) => client.completions.create({ model: MODEL, prompt, max_tokens: 1, temperature: 0 });
    const [a, b, c] = await Promise.all([ask(PROMPT), ask(PROMPT), ask(`${PROMPT} likes a blue cup.`)]);
    assert.equal(a.usage.prompt_tokens, b.usage.prompt_tokens);
    assert.ok(c.usage.prompt_tokens > a.usage.prompt_tokens);
  });

  test('streamed completions with include_usage: chunks join to the plain text, then a usage chunk', async () => {
    const stream = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0,
                                                     stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const chunk of chunks) assert.equal(chunk.object, 'text_completion');
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, [], 'the last chunk carries usage and no choices');
    assert.equal(usage.usage.prompt_tokens, reference.promptTokens);
    const body = chunks.slice(0, -1);
    assert.equal(body.map((ch) => ch.choices[0].text).join(''), reference.text);
    assert.ok(['stop', 'length'].includes(body.at(-1).choices[0].finish_reason));
    for (const ch of body.slice(0, -1)) assert.equal(ch.choices[0].finish_reason ?? null, null);
    for (const ch of body) assert.ok(ch.usage == null, 'usage only in the usage chunk');
    assert.equal(usage.usage.total_tokens, usage.usage.prompt_tokens + usage.usage.completion_tokens);
  });

  test('streamed chat with include_usage: role first, content joins to the plain reply, usage last', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: QUESTION }], max_tokens: 12, temperature: 0, stream: true,
      stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const chunk of chunks) assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage.prompt_tokens, chatReference.promptTokens);
    const body = chunks.slice(0, -1);
    assert.equal(body.map((ch) => ch.choices[0].delta.content ?? '').join(''), chatReference.text);
    assert.ok(['stop', 'length'].includes(body.at(-1).choices[0].finish_reason));
    assert.equal(new Set(chunks.map((ch) => ch.id)).size, 1, 'one id for every chunk');
  });

  test('the SSE wire format: text/event-stream, data: lines, [DONE] last', async () => {
    const response = await fetch(`${server.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: PROMPT, max_tokens: 3, stream: true }) });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type'), /^text\/event-stream/);
    const text = await response.text();
    assert.ok(text.endsWith('data: [DONE]\n\n'), JSON.stringify(text.slice(-40)));
    const events = text.split('\n\n').filter((e) => e.length > 0);
    for (const e of events) assert.match(e, /^data: /);
    for (const e of events.slice(0, -1)) JSON.parse(e.slice(6));
  });

  test('a stop string ends the text before it, finish_reason stop', async () => {
    const full = reference.text;
    assert.ok(full.length >= 6, `greedy output too short to pick a stop string: ${JSON.stringify(full)}`);
    const stop = full.slice(3, 5);
    const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0,
                                                stop: [stop, 'never-seen'] });
    assert.equal(r.choices[0].text, full.slice(0, full.indexOf(stop)));
    assert.equal(r.choices[0].finish_reason, 'stop');
    const single = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0,
                                                     stop });
    assert.equal(single.choices[0].text, r.choices[0].text);
  });

  test('a seed makes sampling repeatable, streamed or not', async () => {
    const body = { model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 1, seed: 7 };
    const [a, b] = await Promise.all([client.completions.create(body), client.completions.create(body)]);
    assert.equal(a.choices[0].text, b.choices[0].text);
    let streamedText = '';
    for await (const chunk of await client.completions.create({ ...body, stream: true })) {
      streamedText += chunk.choices[0]?.text ?? '';
    }
    assert.equal(streamedText, a.choices[0].text);
  });

  test('echo + logprobs with max_tokens 0 scores the prompt (first logprob null)', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 0, echo: true,
                                                logprobs: 2 });
    const [c] = r.choices;
    assert.equal(c.text, PROMPT);
    assert.equal(r.usage.completion_tokens, 0);
    const lp = c.logprobs;
    assert.equal(lp.tokens.length, reference.promptTokens);
    assert.equal(lp.tokens.join(''), PROMPT);
    assert.equal(lp.token_logprobs.length, lp.tokens.length);
    assert.equal(lp.token_logprobs[0], null);
    for (const x of lp.token_logprobs.slice(1)) assert.ok(typeof x === 'number' && x <= 0 && x > -50, `logprob ${x}`);
    assert.equal(lp.text_offset.length, lp.tokens.length);
    assert.equal(lp.text_offset[0], 0);
    for (let i = 1; i < lp.tokens.length; ++i) {
      assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + lp.tokens[i - 1].length);
      const top = lp.top_logprobs[i];
      const values = Object.values(top);
      assert.ok(values.length >= 1 && values.length <= 2, JSON.stringify(top));
      assert.ok(Math.max(...values) >= lp.token_logprobs[i] - 1e-6, 'the top alternatives are the most likely');
    }
  });

  test('greedy logprobs: each token is its position\'s most likely one', async () => {
    const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 6, temperature: 0,
                                                logprobs: 1 });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, r.usage.completion_tokens);
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    for (let i = 0; i < lp.tokens.length; ++i) {
      const [[token, value]] = Object.entries(lp.top_logprobs[i]);
      assert.equal(token, lp.tokens[i]);
      assert.ok(Math.abs(value - lp.token_logprobs[i]) < 1e-6);
    }
  });

  const bad = [
    ['an unknown field', { prompt: PROMPT, max_tokens: 2, frobnicate: 1 }],
    ['temperature -1', { prompt: PROMPT, max_tokens: 2, temperature: -1 }],
    ['temperature of a wrong type', { prompt: PROMPT, max_tokens: 2, temperature: 'hot' }],
    ['top_p 0', { prompt: PROMPT, max_tokens: 2, top_p: 0 }],
    ['top_p 1.5', { prompt: PROMPT, max_tokens: 2, top_p: 1.5 }],
    ['logprobs 6', { prompt: PROMPT, max_tokens: 2, logprobs: 6 }],
    ['max_tokens -1', { prompt: PROMPT, max_tokens: -1 }],
    ['max_tokens 1.5', { prompt: PROMPT, max_tokens: 1.5 }],
    ['prompt + max_tokens over the context', { prompt: PROMPT, max_tokens: CONTEXT }],
    ['a prompt longer than the context', { prompt: 'Ada sees the red boat. '.repeat(CONTEXT / 4), max_tokens: 1 }],
    ['n 2', { prompt: PROMPT, max_tokens: 2, n: 2 }],
    ['5 stop strings', { prompt: PROMPT, max_tokens: 2, stop: ['a', 'b', 'c', 'd', 'e'] }],
    ['an empty stop string', { prompt: PROMPT, max_tokens: 2, stop: '' }],
  ];
  for (const [what, body] of bad) {
    test(`400 for completions with ${what}`, async () => {
      await rejectsWith(client.completions.create({ model: MODEL, ...body }), OpenAI.BadRequestError, 400, what);
    });
  }
  const badChat = [
    ['empty messages', { messages: [] }],
    ['an unknown role', { messages: [{ role: 'robot', content: 'beep' }] }],
    ['an unknown field', { messages: [{ role: 'user', content: 'hi' }], frobnicate: true }],
    ['max_tokens over the context', { messages: [{ role: 'user', content: 'hi' }], max_tokens: CONTEXT }],
  ];
  for (const [what, body] of badChat) {
    test(`400 for chat with ${what}`, async () => {
      await rejectsWith(client.chat.completions.create({ model: MODEL, max_tokens: 2, ...body }),
                        OpenAI.BadRequestError, 400, what);
    });
  }

  test('404 for an unknown model (completions and chat) and an unknown route', async () => {
    await rejectsWith(client.completions.create({ model: 'no-such-model', prompt: PROMPT, max_tokens: 1 }),
                      OpenAI.NotFoundError, 404, 'unknown model');
    await rejectsWith(client.chat.completions.create({ model: 'no-such-model', max_tokens: 1,
                                                       messages: [{ role: 'user', content: 'hi' }] }),
                      OpenAI.NotFoundError, 404, 'unknown model (chat)');
    const response = await fetch(`${server.url}/v1/no-such-route`);
    assert.equal(response.status, 404);
    const body = await response.json();
    assert.equal(typeof body.error?.message, 'string');
  });

  test('a malformed JSON body is 400 and the server stays up', async () => {
    for (const body of ['{"model": "tiny-ember", "prompt": ', '[1, 2]', 'not json at all', '']) {
      const response = await fetch(`${server.url}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      assert.equal(response.status, 400, `body ${JSON.stringify(body)}`);
      assert.equal(typeof (await response.json()).error?.message, 'string');
    }
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });

  test('a prompt over the body limit through the client: a 4xx (413) or a closed connection', async () => {
    try {
      await client.completions.create({ model: MODEL, prompt: 'Ada sees the red boat. '.repeat(300000), max_tokens: 1 });
      assert.fail('a 6.9 MB body was accepted');
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      assert.ok((e.status >= 400 && e.status < 500) || e instanceof OpenAI.APIConnectionError,
                `${e?.constructor?.name}: ${e?.message}`);
    }
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });

  test('a huge body (64 MiB) gets a 4xx or a closed connection, and the server stays up', async (t) => {
    const size = 64 << 20;
    const head = `POST /v1/completions HTTP/1.1\r\nHost: ${new URL(server.url).host}\r\n` +
                 `Content-Type: application/json\r\nContent-Length: ${size}\r\n\r\n{"prompt": "`;
    const piece = Buffer.alloc(1 << 20, 'a');
    const r = await rawRequest(server.url, [head, ...Array.from({ length: 64 }, () => piece)], 20000);
    t.diagnostic(`status ${r.status}, closed ${r.closed}`);
    assert.ok((r.status >= 400 && r.status < 500) || (r.status === null && r.closed),
              `huge body: status ${r.status}, closed ${r.closed}`);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });

  test('a request whose headers never end is closed or answered with a 4xx; the server stays up', async (t) => {
    const r = await slow;
    t.diagnostic(`status ${r.status}, closed ${r.closed}`);
    assert.ok((r.status >= 400 && r.status < 500) || (r.status === null && r.closed),
              `half-sent headers: status ${r.status}, closed ${r.closed} (still open after 30 s?)`);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    const ok = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 2, temperature: 0 });
    assert.equal(ok.choices.length, 1);
  });
});

describe('ember serve --api-key', () => {
  let server;
  before(async () => { server = await startServer(['--api-key', 'sesame', '--served-name', MODEL]); });
  after(async () => { if (server) await stopServer(server); });

  test('a wrong key is 401 on every /v1 route', async () => {
    const wrong = server.client({ apiKey: 'not-sesame' });
    await rejectsWith(wrong.models.list(), OpenAI.AuthenticationError, 401, 'models.list with a wrong key');
    await rejectsWith(wrong.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1 }),
                      OpenAI.AuthenticationError, 401, 'completions with a wrong key');
    await rejectsWith(wrong.chat.completions.create({ model: MODEL, max_tokens: 1,
                                                      messages: [{ role: 'user', content: 'hi' }] }),
                      OpenAI.AuthenticationError, 401, 'chat with a wrong key');
  });

  test('a missing key is 401', async () => {
    const response = await fetch(`${server.url}/v1/models`);
    assert.equal(response.status, 401);
    assert.equal(typeof (await response.json()).error?.message, 'string');
    const prefix = await fetch(`${server.url}/v1/models`, { headers: { Authorization: 'Bearer sesam' } });
    assert.equal(prefix.status, 401, 'a prefix of the key');
  });

  test('the right key works', async () => {
    const right = server.client({ apiKey: 'sesame' });
    const models = [];
    for await (const m of right.models.list()) models.push(m.id);
    assert.deepEqual(models, [MODEL]);
    const r = await right.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, temperature: 0 });
    assert.equal(r.choices.length, 1);
    assert.ok(r.usage.completion_tokens > 0 || r.choices[0].text === '');
  });
});
