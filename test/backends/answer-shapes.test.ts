/**
 * Backend answers in the shapes SDK servers send (issue 29), on the wire, through the gateway,
 * for a session client (2025-11-25, `/mcp/{backend}` piped) and a stateless one (2026-07-28):
 *
 * - a small chunked JSON answer reaches the client whole, its bytes intact, with
 *   `Content-Length` (read whole and sent in one write: backends/held-answer.ts);
 * - an SSE answer whose only event is the result arrives as that message, with
 *   `Content-Length`; one with progress first stays an SSE stream (with event ids for a
 *   session client, which may resume it);
 * - a 1 MB result is streamed, not held whole: the client has read its bytes up to 64 KiB of
 *   the result's text while the backend still holds back its last ones;
 * - a chunked answer whose end is slow is not held back: the client has read the start of the
 *   result's text before the backend sends the rest;
 * - a 1 MB result that names no `resultType`, written slowly as chunked JSON or as one SSE
 *   event, reaches a 2026-07-28 client as it arrives: the backend holds back its last piece
 *   until the client has its first bytes (an answer held whole never arrives, and the deadline
 *   fails the test), and the client reads the backend's message byte for byte with
 *   `resultType` written in where the result closes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BIG_MIXED_TEXT, BIG_TEXT_BYTES, startAnswerShapesBackend, type AnswerShapesBackend } from '../fixtures/answer-shapes-backend.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { statelessMeta } from '../helpers/stateless-call.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let backend: AnswerShapesBackend;
let gateway: GatewayHandle;
let token: string;
const SUB = 'shaper';

before(async () => {
  [redis, idp, backend] = await Promise.all([startRedis(), startOAuthServer(), startAnswerShapesBackend()]);
  gateway = await startGateway({
    issuer: idp.issuer,
    redisUrl: redis.url,
    backends: [
      { name: 'shapes', url: backend.url, protocol: '2025-11-25' },
      { name: 'shapes-2026', url: backend.url, protocol: '2026-07-28' },
    ],
  });
  token = await idp.token({ sub: SUB, aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([backend?.close(), idp?.stop(), redis?.stop()]);
});

const SESSION_HEADERS = () => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' });

/** A session with the gateway, opened as a 2025-11-25 client opens one. */
async function openSession(): Promise<Record<string, string>> {
  const init = await fetch(gateway.endpoint('shapes'), {
    method: 'POST',
    headers: SESSION_HEADERS(),
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'shapes', version: '1' } } }),
  });
  assert.equal(init.status, 200, await init.text());
  const headers = { ...SESSION_HEADERS(), 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
  const initialized = await fetch(gateway.endpoint('shapes'), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  assert.equal(initialized.status, 202);
  return headers;
}

const sessionCall = (headers: Record<string, string>, id: number, name: string) =>
  fetch(gateway.endpoint('shapes'), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } }) });

const statelessCall = (id: number, name: string) =>
  fetch(gateway.endpoint('shapes-2026'), {
    method: 'POST',
    headers: statelessHeaders(token, 'tools/call', name),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {}, _meta: statelessMeta({}) } }),
  });

/** What the client must have read of `big` and `slow` before the backend sends its held-back part: some of the result's text. */
const BEFORE_RELEASE = { big: `"text":"${'x'.repeat(64 * 1024)}`, slow: '"text":"answer of slow: é' };

describe('a session client (2025-11-25)', () => {
  let headers: Record<string, string>;
  before(async () => {
    headers = await openSession();
  });

  test('a small chunked JSON answer arrives with its bytes intact and with Content-Length', async () => {
    const res = await sessionCall(headers, 1, 'chunked');
    const body = Buffer.from(await res.arrayBuffer());
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.equal(res.headers.get('content-length'), String(backend.sent.get('chunked')!.length));
    assert.ok(body.equals(backend.sent.get('chunked')!), 'the bytes the backend sent');
  });

  test('an SSE answer whose only event is the result arrives as that message, with Content-Length', async () => {
    const res = await sessionCall(headers, 4, 'sse-one');
    const body = Buffer.from(await res.arrayBuffer());
    const event = backend.sent.get('sse-one')!.toString('utf8');
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.equal(res.headers.get('content-length'), String(body.length));
    assert.equal(body.toString('utf8'), event.slice(event.indexOf('data: ') + 'data: '.length).trimEnd());
  });

  test('an SSE answer with progress before the result, all arrived, is one SSE response with its length: priming, each event with an id, nothing stored', async () => {
    const res = await sessionCall(headers, 5, 'sse-progress');
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const text = await res.text();
    // One response with its length, not a relayed stream (issue 29, src/mcp/complete-stream.ts).
    assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(text)));
    const events = text.split('\n\n').filter(Boolean);
    const field = (event: string, name: string) => [...event.matchAll(/^(\w+): ?(.*)$/gm)].find((m) => m[1] === name)?.[2];
    const ids = events.map((e) => field(e, 'id'));
    const streamId = ids[0]!.split('-')[0]!;
    assert.deepEqual(ids, [0, 1, 2, 3].map((n) => `${streamId}-${n}`), 'a priming event, then one id per event, in order');
    assert.equal(field(events[0]!, 'data'), '', 'the priming event carries no message');
    const sent = backend.sent.get('sse-progress')!.toString('utf8').split('\n\n').filter(Boolean).map((e) => field(e, 'data'));
    assert.deepEqual(events.slice(1).map((e) => field(e, 'data')), sent, "the backend's messages as sent");
    assert.equal(JSON.parse(field(events[3]!, 'data')!).id, 5);
    // Finished, so there is nothing to resume: no replay log in Redis for the stream.
    const stored = await gateway.app.mcp.store.readEvents({ userKey: userKeyOf(idp.issuer, SUB), sessionId: headers['mcp-session-id']!, streamId });
    assert.deepEqual(stored, []);
  });

  test('a 1 MB chunked answer is streamed: the client has its first bytes while the backend holds back its last', async () => {
    const res = await withDeadline(sessionCall(headers, 2, 'big'), 10_000, 'the answer headers before the backend sent its last bytes');
    assert.equal(res.headers.get('content-length'), null);
    const body = await readReleasing(res, BEFORE_RELEASE.big);
    assert.ok(body.equals(backend.sent.get('big')!), 'the bytes the backend sent');
    assert.equal((JSON.parse(body.toString('utf8')) as { result: { content: Array<{ text: string }> } }).result.content[0]!.text.length, BIG_TEXT_BYTES);
  });

  test('a chunked answer whose end is slow is relayed as it comes, not held back', async () => {
    const res = await withDeadline(sessionCall(headers, 3, 'slow'), 10_000, 'the answer headers before the backend sent its end');
    const body = await readReleasing(res, BEFORE_RELEASE.slow);
    assert.ok(body.equals(backend.sent.get('slow')!), 'the bytes the backend sent');
  });
});

describe('a stateless client (2026-07-28)', () => {
  test('a small chunked JSON answer arrives as one JSON message with Content-Length', async () => {
    const res = await statelessCall(11, 'chunked');
    const body = Buffer.from(await res.arrayBuffer());
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.equal(res.headers.get('content-length'), String(body.length));
    assert.deepEqual(JSON.parse(body.toString('utf8')), JSON.parse(backend.sent.get('chunked')!.toString('utf8')));
  });

  test('an SSE answer whose only event is the result arrives as that message, with Content-Length', async () => {
    const res = await statelessCall(14, 'sse-one');
    const body = Buffer.from(await res.arrayBuffer());
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.equal(res.headers.get('content-length'), String(body.length));
    const event = backend.sent.get('sse-one')!.toString('utf8');
    assert.deepEqual(JSON.parse(body.toString('utf8')), JSON.parse(event.slice(event.indexOf('data: ') + 'data: '.length)));
  });

  test('a 1 MB chunked answer is streamed as an SSE event: the client has the answer begun before the backend sends its last bytes', async () => {
    const res = await withDeadline(statelessCall(12, 'big'), 10_000, 'the answer headers before the backend sent its last bytes');
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const body = await readReleasing(res, BEFORE_RELEASE.big);
    const events = body.toString('utf8').split('\n').filter((line) => line.startsWith('data: '));
    assert.equal(events.length, 1);
    assert.deepEqual(JSON.parse(events[0]!.slice('data: '.length)), JSON.parse(backend.sent.get('big')!.toString('utf8')));
  });

  test('a chunked answer whose end is slow is streamed: the client has the answer begun before the backend sends its end', async () => {
    const res = await withDeadline(statelessCall(13, 'slow'), 10_000, 'the answer headers before the backend sent its end');
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const body = await readReleasing(res, BEFORE_RELEASE.slow);
    const events = body.toString('utf8').split('\n').filter((line) => line.startsWith('data: '));
    assert.deepEqual(events.map((line) => JSON.parse(line.slice('data: '.length))), [JSON.parse(backend.sent.get('slow')!.toString('utf8'))]);
  });

  for (const [name, shape] of [['big-untyped', 'chunked JSON'], ['big-sse', 'one SSE event']] as const) {
    test(`a 1 MB result as ${shape}, slowly, streams through intact with resultType added`, async () => {
      const res = await withDeadline(statelessCall(21, name), 10_000, 'the answer headers');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/event-stream');
      const data = eventData((await readReleasing(res)).toString('utf8'));
      const sent = backend.sent.get(name)!.toString('utf8');
      const message = sent.slice(sent.indexOf('{'), sent.lastIndexOf('}') + 1);
      assert.equal(data, `${message.slice(0, -2)},"resultType":"complete"}}`, "the backend's bytes, the member written in where the result closes");
      const parsed = JSON.parse(data) as { id: number; result: { resultType: string; content: Array<{ text: string }> } };
      assert.equal(parsed.id, 21);
      assert.equal(parsed.result.resultType, 'complete');
      assert.equal(parsed.result.content[0]!.text, BIG_MIXED_TEXT);
    });
  }
});

/**
 * The answer's bytes. The backend lets its held-back part go only once the client has read
 * bytes of the answer (at least `before`, when given): an answer whose headers come early but
 * whose body is held until the backend's end never gets that far, and the deadline fails the test.
 */
async function readReleasing(res: Response, before = ''): Promise<Buffer> {
  const reader = res.body!.getReader();
  const chunks: Buffer[] = [];
  const readBefore = async () => {
    do {
      const step = await reader.read();
      assert.equal(step.done, false, `the answer ended before the backend's held-back part: ${Buffer.concat(chunks).toString('utf8').slice(0, 200)}`);
      chunks.push(Buffer.from(step.value!));
    } while (!Buffer.concat(chunks).includes(before));
  };
  await withDeadline(readBefore(), 10_000, `the answer's first bytes${before ? ` (up to ${before.slice(0, 30)}…)` : ''} while the backend still holds back its last`);
  backend.release();
  const readRest = async () => {
    for (let step = await reader.read(); !step.done; step = await reader.read()) chunks.push(Buffer.from(step.value));
  };
  await withDeadline(readRest(), 20_000, 'the whole answer');
  return Buffer.concat(chunks);
}

/** The one SSE event's data, its `data:` lines joined as a client joins them. */
function eventData(body: string): string {
  const events = body.split('\n\n').filter((e) => e.trim());
  assert.equal(events.length, 1, 'one event');
  return events[0]!.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
}
