// `ember serve`'s HTTP layer against hostile and sloppy clients over raw sockets (docs/cli.md, Serving:
// Limits, Errors, Stopping): a chunked body over --max-body-bytes gets 413 before it is read (the
// server's memory stays flat); body framing a reverse proxy would refuse gets 400 or 501 at once; a
// POST without a body is answered at once; a 413 sent before a large body is read still reaches the
// client; 300 connections trickling their headers from one address neither hold up another client
// nor the server past --header-timeout; after SIGTERM, /health answers 503 (on a kept-alive
// connection and a new one) while in-flight streams finish; out-of-range max_tokens and a request
// too large for the KV cache get messages that say so; an HTTP/1.0 client is sent no chunked coding
// (a whole body with a Content-Length, a stream ended by the connection's close), no 100 Continue, and
// its connection is closed after the response, while HTTP/1.1 stays chunked and kept alive. Traffic
// goes to 127.0.0.1 only.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { startServer, stopServer } from './harness.mjs';

const MODEL = 'tiny-ember';
const MiB = 1 << 20;

// Sends `chunks` (strings or Buffers) over one connection and collects the answer until the server
// closes, `waitMs` pass or `enough(text)` holds: {status, text, closed, error, firstByteMs, ms}.
// With `readAfterWrites` nothing is read before the last chunk is written, as an HTTP client that
// sends its whole request before it reads the response (a write that fails loses the answer).
function exchange(url, chunks, { waitMs = 10000, localAddress, enough, readAfterWrites = false } = {}) {
  const { hostname, port } = new URL(url);
  const start = Date.now();
  return new Promise((resolve) => {
    const socket = net.connect({ port: Number(port), host: hostname, localAddress });
    let text = '', done = false, error = null, firstByteMs = null;
    const finish = (closed) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const m = text.match(/^HTTP\/1\.[01] (\d{3})/);
      resolve({ status: m ? Number(m[1]) : null, text, closed, error, firstByteMs, ms: Date.now() - start });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (d) => {
      if (firstByteMs === null) firstByteMs = Date.now() - start;
      text += d.toString('latin1');
      if (enough?.(text)) finish(false);
    });
    socket.on('close', () => finish(true));
    socket.on('error', (e) => { error = e.code ?? e.message; });
    if (readAfterWrites) socket.pause();
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        if (done || socket.destroyed) return;
        if (!socket.write(chunk)) {
          await new Promise((r) => { socket.once('drain', r); socket.once('close', r); });
        }
      }
      socket.resume();
    });
  });
}

const host = (server) => new URL(server.url).host;
const post = (server, headers) => `POST /v1/completions HTTP/1.1\r\nHost: ${host(server)}\r\n` +
                                  `Content-Type: application/json\r\n${headers}\r\n`;
const errorOf = (text) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).error;
const chunked = (piece) => `${piece.length.toString(16)}\r\n${piece}\r\n`;
// Whether `text` holds a whole response with a Content-Length (the connection may stay open).
const whole = (text) => {
  const end = text.indexOf('\r\n\r\n');
  const length = text.slice(0, end).match(/\r\nContent-Length: (\d+)/i);
  return end >= 0 && length !== null && text.length >= end + 4 + Number(length[1]);
};

// Kilobytes of the server's resident memory now and at its peak (/proc/PID/status).
function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(status.match(new RegExp(`${name}:\\s+(\\d+) kB`))[1]);
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

describe('ember serve: body framing', () => {
  let server;
  before(async () => { server = await startServer(['--served-name', MODEL]); });
  after(async () => { if (server) await stopServer(server); });

  test('a 39 MB chunked body gets 413 before it is read, and memory stays flat', async (t) => {
    const before = memory(server.proc.pid);
    const piece = chunked('"' + 'Ada sees the red boat. '.repeat(MiB / 23 - 1) + '"');
    const chunks = [post(server, 'Transfer-Encoding: chunked\r\n') + chunked('{"prompt": ')];
    for (let i = 0; i < 39; ++i) chunks.push(piece);
    chunks.push(chunked('}') + '0\r\n\r\n');
    const r = await exchange(server.url, chunks, { waitMs: 30000 });
    const afterward = memory(server.proc.pid);
    t.diagnostic(`status ${r.status} after ${r.firstByteMs} ms (closed after ${r.ms} ms); RSS ` +
                 `${before.rss >> 10} -> ${afterward.rss >> 10} MiB, peak ${before.peak >> 10} -> ` +
                 `${afterward.peak >> 10} MiB`);
    assert.equal(r.status, 413, r.text.slice(0, 300));
    assert.equal(errorOf(r.text).code, 'request_too_large');
    assert.match(r.text, /Connection: close/);
    assert.ok(r.firstByteMs < 2000, `413 after ${r.firstByteMs} ms`);
    assert.ok(afterward.peak - before.peak < 16 * 1024, `peak RSS grew ${(afterward.peak - before.peak) >> 10} MiB`);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  });

  test('a 5 MB body with Content-Length and no Expect: 100-continue reads its 413, not a reset', async () => {
    const size = 5 * MiB;
    const chunks = [post(server, `Content-Length: ${size}\r\n`)];
    for (let i = 0; i < 5; ++i) chunks.push(Buffer.alloc(MiB, 'a'));
    for (let attempt = 0; attempt < 3; ++attempt) {
      const r = await exchange(server.url, chunks, { readAfterWrites: true });
      assert.equal(r.status, 413, `attempt ${attempt}: status ${r.status}, error ${r.error}, ${r.text.length} bytes`);
      assert.equal(errorOf(r.text).code, 'request_too_large');
    }
  });

  test('framing a reverse proxy refuses is answered at once', async () => {
    const cases = [
      ['a POST without a body', '', 400, 'invalid_json'],
      ['two different Content-Lengths', 'Content-Length: 2\r\nContent-Length: 3\r\n', 400, 'invalid_http_framing'],
      ['Content-Length with chunked', 'Content-Length: 2\r\nTransfer-Encoding: chunked\r\n', 400, 'invalid_http_framing'],
      ['a negative Content-Length', 'Content-Length: -1\r\n', 400, 'invalid_http_framing'],
      ['a Transfer-Encoding other than chunked', 'Transfer-Encoding: gzip\r\n', 501, 'unsupported_transfer_encoding'],
      ['a malformed chunked body', 'Transfer-Encoding: chunked\r\n', 400, 'invalid_http_framing', 'zz\r\n'],
    ];
    for (const [what, headers, status, code, body = ''] of cases) {
      const r = await exchange(server.url, [post(server, headers) + body], { waitMs: 8000, enough: whole });
      assert.equal(r.status, status, `${what}: ${r.text.slice(0, 300)}`);
      assert.equal(errorOf(r.text).code, code, what);
      assert.ok(r.firstByteMs < 1000, `${what}: answered after ${r.firstByteMs} ms`);
    }
  });

  test('a chunked body within the limit is read, and a request pipelined after it too', async () => {
    const body = JSON.stringify({ model: MODEL, prompt: 'Ada sees', max_tokens: 2, temperature: 0 });
    const request = post(server, 'Transfer-Encoding: chunked\r\n') + chunked(body.slice(0, 10)) +
                    chunked(body.slice(10)) + '0\r\n\r\n' +
                    `GET /health HTTP/1.1\r\nHost: ${host(server)}\r\nConnection: close\r\n\r\n`;
    const r = await exchange(server.url, [request]);
    const statuses = [...r.text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
    assert.deepEqual(statuses, [200, 200], r.text.slice(0, 600));
    assert.match(r.text, /"object":"text_completion"/);
    assert.match(r.text, /\{"status":"ok"\}$/);
  });
});

// The head's lines (the status line first) and the body of one response.
function response(text) {
  const end = text.indexOf('\r\n\r\n');
  assert.ok(end >= 0, `no whole response head in ${JSON.stringify(text.slice(0, 300))}`);
  const lines = text.slice(0, end).split('\r\n');
  const header = (name) => lines.slice(1).find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
    ?.slice(name.length + 1).trim() ?? null;
  return { statusLine: lines[0], header, body: text.slice(end + 4) };
}

describe('ember serve: HTTP/1.0 clients', () => {
  let server;
  before(async () => { server = await startServer(['--served-name', MODEL]); });
  after(async () => { if (server) await stopServer(server); });

  const request10 = (path, body, headers = '') =>
    `POST ${path} HTTP/1.0\r\nContent-Type: application/json\r\n${headers}` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  // A response a 1.0 client can frame: no chunked coding, Connection: close, no Keep-Alive, closed.
  const readableBy10 = (r, what) => {
    assert.ok(r.closed, `${what}: the server did not close the connection: ${JSON.stringify(r.text.slice(0, 300))}`);
    const res = response(r.text);
    assert.equal(res.header('Transfer-Encoding'), null, `${what}: ${res.statusLine} with Transfer-Encoding`);
    assert.equal(res.header('Connection'), 'close', what);
    assert.equal(res.header('Keep-Alive'), null, what);
    return res;
  };

  test('a completion is one body with its Content-Length, and the connection closes', async () => {
    const body = JSON.stringify({ model: MODEL, prompt: 'Ada sees', max_tokens: 5, temperature: 0 });
    const r = await exchange(server.url, [request10('/v1/completions', body)]);
    const res = readableBy10(r, 'a 1.0 completion');
    assert.match(res.statusLine, /^HTTP\/1\.[01] 200 OK$/);
    assert.equal(res.header('Content-Type'), 'application/json');
    assert.equal(Number(res.header('Content-Length')), res.body.length, r.text.slice(0, 300));
    const json = JSON.parse(res.body);
    assert.equal(json.object, 'text_completion');
    assert.equal(typeof json.choices[0].text, 'string');
    assert.equal(json.usage.completion_tokens, 5);
  });

  test('a stream is close-delimited server-sent events, ending with [DONE]', async () => {
    const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 6,
                                  temperature: 0, stream: true });
    const r = await exchange(server.url, [request10('/v1/chat/completions', body)]);
    const res = readableBy10(r, 'a 1.0 stream');
    assert.match(res.statusLine, /^HTTP\/1\.[01] 200 OK$/);
    assert.equal(res.header('Content-Type'), 'text/event-stream');
    assert.equal(res.header('Content-Length'), null);
    assert.ok(res.body.startsWith('data: '), `the body starts ${JSON.stringify(res.body.slice(0, 40))}`);
    assert.ok(res.body.endsWith('data: [DONE]\n\n'), `the body ends ${JSON.stringify(res.body.slice(-40))}`);
    const events = res.body.slice(0, -2).split('\n\n');  // no chunk-size line between them
    for (const e of events) assert.match(e, /^data: /, JSON.stringify(e));
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.match(chunks.at(-1).choices[0].finish_reason ?? '', /^(stop|length)$/);
  });

  test('errors have a Content-Length and close; keep-alive is not kept; no 100 Continue', async () => {
    const cases = [
      ['bad JSON', request10('/v1/completions', '{"prompt": '), 400, 'invalid_json'],
      ['an unknown path', 'GET /v2/nothing HTTP/1.0\r\n\r\n', 404, 'unknown_url'],
      ['bad JSON asking for keep-alive', request10('/v1/completions', '{', 'Connection: Keep-Alive\r\n'), 400,
       'invalid_json'],
      ['a Transfer-Encoding', 'POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
       400, 'invalid_http_framing'],
    ];
    for (const [what, text, status, code] of cases) {
      const r = await exchange(server.url, [text], { waitMs: 4000 });
      const res = readableBy10(r, what);
      assert.match(res.statusLine, new RegExp(`^HTTP/1\\.[01] ${status} `), what);
      assert.equal(Number(res.header('Content-Length')), res.body.length, what);
      assert.equal(JSON.parse(res.body).error.code, code, what);
    }
    const body = JSON.stringify({ prompt: 'Ada', max_tokens: 1 });
    const r = await exchange(server.url, [request10('/v1/completions', body, 'Connection: Keep-Alive\r\nExpect: 100-continue\r\n')]);
    assert.match(r.text, /^HTTP\/1\.[01] 200 OK\r\n/, 'a 1xx is never sent to a 1.0 client');
    const res = readableBy10(r, 'a completion asking for keep-alive and 100 Continue');
    assert.equal(JSON.parse(res.body).usage.completion_tokens, 1);
  });

  test('HTTP/1.1 stays chunked and kept alive', async () => {
    const body = JSON.stringify({ model: MODEL, prompt: 'Ada sees', max_tokens: 3, temperature: 0 });
    const next = `GET /health HTTP/1.1\r\nHost: ${host(server)}\r\nConnection: close\r\n\r\n`;
    const r = await exchange(server.url, [post(server, `Content-Length: ${body.length}\r\n`) + body + next]);
    const res = response(r.text);
    assert.match(res.statusLine, /^HTTP\/1\.1 200 OK$/);
    assert.equal(res.header('Transfer-Encoding'), 'chunked');
    assert.match(res.header('Keep-Alive') ?? '', /^timeout=\d+, max=\d+$/);
    assert.equal(res.header('Connection'), null);
    assert.match(res.body, /^[0-9a-f]+\r\n\{"id":"cmpl-[^]*\r\n0\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
    assert.ok(r.closed && r.text.endsWith('{"status":"ok"}'), 'the next request on the connection is answered');
  });
});

describe('ember serve: slow clients', () => {
  let server;
  before(async () => { server = await startServer(['--served-name', MODEL]); });
  after(async () => { if (server) await stopServer(server); });

  test('300 connections trickling headers from one address hold up nobody else', async (t) => {
    const { port } = new URL(server.url);
    const request = `GET /health HTTP/1.1\r\nHost: ${host(server)}\r\n\r\n`;
    const tricklers = Array.from({ length: 300 }, () => {
      const s = net.connect({ port: Number(port), host: '127.0.0.1', localAddress: '127.0.0.2' });
      const state = { socket: s, text: '', sent: 0 };
      s.on('data', (d) => { state.text += d.toString('latin1'); });
      s.on('error', () => {});
      return state;
    });
    const tick = () => {
      for (const w of tricklers) {
        if (!w.socket.destroyed && w.sent < request.length - 2) w.socket.write(request[w.sent++]);
      }
    };
    tick();
    const timer = setInterval(tick, 1000);
    try {
      await new Promise((r) => setTimeout(r, 1500));
      const timed = async (what, fn) => {
        const start = Date.now();
        const result = await fn();
        const ms = Date.now() - start;
        t.diagnostic(`${what}: ${ms} ms with 300 trickling connections open`);
        assert.ok(ms < 1000, `${what} took ${ms} ms`);
        return result;
      };
      const health = await timed('GET /health', () => fetch(`${server.url}/health`, { signal: AbortSignal.timeout(5000) }));
      assert.equal(health.status, 200);
      const completion = await timed('a completion', () => fetch(`${server.url}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: AbortSignal.timeout(5000),
        body: JSON.stringify({ prompt: 'Ada sees', max_tokens: 4, temperature: 0 }) }));
      assert.equal(completion.status, 200);
      const refused = tricklers.filter((w) => /^HTTP\/1\.1 503 /.test(w.text));
      t.diagnostic(`${refused.length} of 300 answered 503 (over --max-connections-per-client 64)`);
      assert.ok(refused.length >= 300 - 64, `${refused.length} answered 503`);
      assert.equal(errorOf(refused[0].text).code, 'too_many_connections');
    } finally {
      clearInterval(timer);
      for (const w of tricklers) w.socket.destroy();
    }
  });

  test('--header-timeout cuts trickling headers with 408, --max-connections-per-client 2 refuses a third', async (t) => {
    const s = await startServer(['--served-name', MODEL, '--header-timeout', '1', '--max-connections-per-client', '2']);
    try {
      const slow = exchange(s.url, [`GET /health HTTP/1.1\r\nHost: ${host(s)}\r\n`], { waitMs: 6000 });
      const idle = exchange(s.url, [], { waitMs: 6000 });
      await new Promise((r) => setTimeout(r, 200));
      const third = await exchange(s.url, [`GET /health HTTP/1.1\r\nHost: ${host(s)}\r\n\r\n`], { waitMs: 3000 });
      assert.equal(third.status, 503, third.text);
      assert.equal(errorOf(third.text).code, 'too_many_connections');
      const [cut, quiet] = await Promise.all([slow, idle]);
      t.diagnostic(`a trickled head: ${cut.status} after ${cut.ms} ms; an idle connection closed after ${quiet.ms} ms`);
      assert.equal(cut.status, 408, cut.text);
      assert.ok(cut.closed && cut.ms > 800 && cut.ms < 2500, `408 and close after ${cut.ms} ms`);
      assert.ok(quiet.closed && quiet.text === '' && quiet.ms < 2500, `idle: closed ${quiet.closed} after ${quiet.ms} ms`);
      assert.equal((await fetch(`${s.url}/health`)).status, 200);  // their places are free again
    } finally {
      await stopServer(s);
    }
  });
});

describe('ember serve: stopping', () => {
  test('after SIGTERM, /health answers 503 while in-flight streams finish', async (t) => {
    const server = await startServer(['--served-name', MODEL, '--max-seqs', '1', '--shutdown-grace', '8']);
    const health = `GET /health HTTP/1.1\r\nHost: ${host(server)}\r\n\r\n`;
    const { port } = new URL(server.url);
    const kept = net.connect(Number(port), '127.0.0.1');
    let keptText = '';
    kept.on('data', (d) => { keptText += d.toString('latin1'); });
    kept.on('error', () => {});
    await new Promise((r) => kept.on('connect', r));
    kept.write(health);
    const until = async (check, ms) => {
      for (const end = Date.now() + ms; !check() && Date.now() < end;) await new Promise((r) => setTimeout(r, 10));
    };
    await until(() => /\{"status":"ok"\}/.test(keptText), 3000);
    assert.match(keptText, /^HTTP\/1\.1 200/);

    // Twelve streams, one at a time (--max-seqs 1): greedy "Ada" ends at <|endoftext|> after
    // about 140 ms here, so the twelve keep the server draining for about 1.4 s after SIGTERM
    // (six once left it 45 ms after the checks below began: the new connection found no listener).
    const streams = Array.from({ length: 12 }, () => fetch(`${server.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Ada', max_tokens: 1000, temperature: 0, stream: true }) })
      .then(async (response) => ({ status: response.status, text: await response.text() })));
    await new Promise((r) => setTimeout(r, 300));
    const stopping = server.stop();
    await new Promise((r) => setTimeout(r, 500));  // the server looks for a signal every 200 ms
    keptText = '';
    kept.write(health);  // the kept-alive connection and a new one, at the same time
    const freshReply = exchange(server.url, [health], { waitMs: 3000 });
    await until(() => /\r\n\r\n\{/.test(keptText), 3000);
    const fresh = await freshReply;
    const outcomes = await Promise.all(streams);
    const { code, ms } = await stopping;
    kept.destroy();
    t.diagnostic(`kept-alive /health: ${keptText.slice(0, 12)}; new connection: ${fresh.status}; exit ${code} after ${ms} ms`);
    assert.match(keptText, /^HTTP\/1\.1 503/, `kept-alive connection after SIGTERM: ${JSON.stringify(keptText)}`);
    assert.match(keptText, /Connection: close/);
    assert.equal(fresh.status, 503, `new connection after SIGTERM: ${fresh.text}`);
    for (const o of outcomes) {
      assert.equal(o.status, 200);
      assert.match(o.text, /data: \[DONE\]/);
    }
    assert.equal(code, 0);
    assert.ok(ms < 10000, `exit after ${ms} ms`);
  });
});

describe('ember serve: request limits', () => {
  let server;
  before(async () => { server = await startServer(['--served-name', MODEL, '--kv-blocks', '2']); });
  after(async () => { if (server) await stopServer(server); });

  const ask = (body) => fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body })
    .then(async (r) => ({ status: r.status, error: (await r.json()).error }));

  test('max_tokens past 64 bits is out of range, with the range', async () => {
    const r = await ask('{"prompt": "Ada", "max_tokens": 9223372036854775808}');
    assert.equal(r.status, 400);
    assert.equal(r.error.param, 'max_tokens');
    assert.match(r.error.message, /^max_tokens must be between 0 and 9223372036854775807, got 9223372036854775808$/);
  });

  test('a request too large for the KV cache names its need, the cache and the option', async () => {
    const r = await ask(JSON.stringify({ prompt: 'Ada', max_tokens: 100 }));
    assert.equal(r.status, 400);
    assert.equal(r.error.code, 'context_length_exceeded');
    assert.equal(r.error.param, 'max_tokens');
    assert.doesNotMatch(r.error.message, /engine:/);
    assert.match(r.error.message, /needs \d+ tokens of KV cache .* whole cache of 32 tokens.*--kv-blocks/);
  });
});
