/**
 * The HTTP rules of the Streamable HTTP transport (MCP 2025-11-25 "Transports") as the
 * gateway enforces them, checked with raw `fetch` so that nothing is hidden by an SDK:
 * content negotiation, JSON-RPC framing errors, body limit, session and protocol-version
 * headers, user binding of sessions, DNS-rebinding protection, SSE priming, event ids, the
 * one-GET-stream rule, DELETE, batches and `Last-Event-ID` resumption.
 *
 * Backend: server-everything. Store: memory. The gateway's body limit is lowered to 2 KiB.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { messageOf, SseReader, type SseEvent } from '../helpers/sse-client.js';

const BACKEND = 'everything';
const LATEST = '2025-11-25';
const ACCEPT_BOTH = 'application/json, text/event-stream';
const REQUEST_MS = 10_000;
const EVENT_ID = /^[0-9a-f]{16}-\d+$/;

/** The single JSON-RPC message of a POST answer, JSON or SSE. */
async function singleAnswer(res: Response, id: number | string): Promise<Record<string, unknown>> {
  const type = res.headers.get('content-type') ?? '';
  if (type.startsWith('application/json')) return (await res.json()) as Record<string, unknown>;
  assert.ok(type.startsWith('text/event-stream'), `unexpected content-type ${type}`);
  const reader = new SseReader(res);
  const events = await reader.until((e) => messageOf(e)?.id === id);
  await reader.cancel();
  const answer = events.map(messageOf).find((m) => m?.id === id);
  assert.ok(answer, `no answer with id ${id} in ${JSON.stringify(events)}`);
  return answer;
}

// ------------------------------------------------------------------------------ fixture ---

let oauth: OAuthHandle | undefined;
let everything: EverythingHandle | undefined;
let gateway: GatewayHandle | undefined;
let alice = '';
let bob = '';
/** Controllers of every fetch that may still stream; aborted at the end. */
const open: AbortController[] = [];

before(async () => {
  [oauth, everything] = await Promise.all([startOAuthServer(), startEverything()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: BACKEND, url: everything.url, timeout: '30s' }],
    overrides: { limits: { maxBodyBytes: 2048 } },
  });
  [alice, bob] = await Promise.all([
    oauth.token({ sub: 'alice', aud: gateway.audience }),
    oauth.token({ sub: 'bob', aud: gateway.audience }),
  ]);
});

after(async () => {
  for (const c of open) c.abort();
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), everything?.stop()]);
});

function endpoint(backend = BACKEND): URL {
  assert.ok(gateway, 'gateway not started');
  return gateway.endpoint(backend);
}

interface PostOptions {
  token?: string;
  sessionId?: string;
  version?: string | null;
  accept?: string;
  contentType?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** A raw POST. `version: null` leaves the MCP-Protocol-Version header out. */
function post(body: unknown, o: PostOptions = {}): Promise<Response> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${o.token ?? alice}`,
    accept: o.accept ?? ACCEPT_BOTH,
    'content-type': o.contentType ?? 'application/json',
    ...o.headers,
  };
  if (o.sessionId) headers['mcp-session-id'] = o.sessionId;
  if (o.version !== null && o.sessionId) headers['mcp-protocol-version'] = o.version ?? LATEST;
  return fetch(endpoint(), {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: o.signal ?? AbortSignal.timeout(REQUEST_MS),
  });
}

function get(sessionId: string, o: { token?: string; lastEventId?: string; version?: string; signal?: AbortSignal } = {}): Promise<Response> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${o.token ?? alice}`,
    accept: 'text/event-stream',
    'mcp-session-id': sessionId,
    'mcp-protocol-version': o.version ?? LATEST,
  };
  if (o.lastEventId) headers['last-event-id'] = o.lastEventId;
  return fetch(endpoint(), { method: 'GET', headers, signal: o.signal });
}

function del(sessionId: string, token = alice): Promise<Response> {
  return fetch(endpoint(), {
    method: 'DELETE',
    headers: { authorization: `Bearer ${token}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': LATEST },
    signal: AbortSignal.timeout(REQUEST_MS),
  });
}

let nextId = 1000;
const rpc = (method: string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id: nextId++, method, params });

/** initialize + notifications/initialized, as a client would; returns the gateway session id. */
async function initSession(token = alice, protocolVersion = LATEST): Promise<string> {
  const init = rpc('initialize', {
    protocolVersion,
    capabilities: {},
    clientInfo: { name: 'transport-rules-test', version: '1.0.0' },
  });
  const res = await post(init, { token });
  assert.equal(res.status, 200, `initialize answered ${res.status}`);
  const sessionId = res.headers.get('mcp-session-id');
  assert.ok(sessionId, 'initialize answer carries Mcp-Session-Id');
  const answer = await singleAnswer(res, init.id);
  assert.equal((answer.result as { protocolVersion?: string } | undefined)?.protocolVersion, protocolVersion);
  const initialized = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { token, sessionId, version: protocolVersion });
  assert.equal(initialized.status, 202);
  return sessionId;
}

async function errorCodeOf(res: Response): Promise<number | undefined> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { error?: { code?: number } };
    return body.error?.code;
  } catch {
    assert.fail(`error body is not JSON: ${text.slice(0, 300)}`);
  }
}

/** tools/list on a session; returns the HTTP status and the answer (if any). */
async function toolsList(sessionId: string, o: PostOptions = {}): Promise<{ status: number; answer?: Record<string, unknown> }> {
  const req = rpc('tools/list');
  const res = await post(req, { sessionId, ...o });
  if (res.status !== 200) {
    await res.body?.cancel();
    return { status: res.status };
  }
  return { status: res.status, answer: await singleAnswer(res, req.id) };
}

// -------------------------------------------------------------------------------- tests ---

describe('POST content rules', () => {
  let session = '';
  before(async () => {
    session = await initSession();
  });

  test('Accept without text/event-stream (or without application/json) → 406', async () => {
    for (const accept of ['application/json', 'text/event-stream']) {
      const res = await post(rpc('tools/list'), { sessionId: session, accept });
      assert.equal(res.status, 406, `Accept: ${accept}`);
      assert.equal(await errorCodeOf(res), -32600);
    }
  });

  test('Content-Type text/plain → 415', async () => {
    const res = await post(JSON.stringify(rpc('tools/list')), { sessionId: session, contentType: 'text/plain' });
    assert.equal(res.status, 415);
    await res.body?.cancel();
  });

  test('Content-Type application/json with a charset parameter is accepted', async () => {
    const { status } = await toolsList(session, { contentType: 'application/json; charset=utf-8' });
    assert.equal(status, 200);
  });

  test('malformed JSON → 400 with JSON-RPC parse error -32700', async () => {
    const res = await post('{"jsonrpc": "2.0", "id": 1, "method": ', { sessionId: session });
    assert.equal(res.status, 400);
    assert.equal(await errorCodeOf(res), -32700);
  });

  test('a message without "jsonrpc" → 400 with -32600', async () => {
    const res = await post({ id: 5, method: 'tools/list', params: {} }, { sessionId: session });
    assert.equal(res.status, 400);
    assert.equal(await errorCodeOf(res), -32600);
  });

  test('a body over limits.maxBodyBytes → 413', async () => {
    const big = rpc('tools/call', { name: 'echo', arguments: { message: 'x'.repeat(4096) } });
    const res = await post(big, { sessionId: session });
    assert.equal(res.status, 413);
    await res.body?.cancel();
    // Just under the limit still works.
    const small = rpc('tools/call', { name: 'echo', arguments: { message: 'y'.repeat(1500) } });
    const ok = await post(small, { sessionId: session });
    assert.equal(ok.status, 200);
    const answer = await singleAnswer(ok, small.id);
    assert.equal((answer.result as { content: Array<{ text: string }> }).content[0]!.text, `Echo: ${'y'.repeat(1500)}`);
  });

  test('a notification (notifications/initialized) → 202 with no body', async () => {
    const res = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { sessionId: session });
    assert.equal(res.status, 202);
    assert.equal(await res.text(), '');
  });

  test('unknown backend → 404', async () => {
    const res = await fetch(endpoint('no-such-backend'), {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}`, accept: ACCEPT_BOTH, 'content-type': 'application/json' },
      body: JSON.stringify(rpc('initialize', { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'x', version: '1' } })),
      signal: AbortSignal.timeout(REQUEST_MS),
    });
    assert.equal(res.status, 404);
    await res.body?.cancel();
  });
});

describe('session and protocol-version headers', () => {
  let session = '';
  before(async () => {
    session = await initSession();
  });

  test('a non-initialize POST without Mcp-Session-Id → 400', async () => {
    const res = await post(rpc('tools/list'), { version: LATEST, headers: { 'mcp-protocol-version': LATEST } });
    assert.equal(res.status, 400);
    assert.equal(typeof (await errorCodeOf(res)), 'number');
  });

  test('an unknown session id → 404 (well-formed and malformed ids alike)', async () => {
    for (const id of [randomBytes(32).toString('base64url'), 'not-a-session']) {
      const res = await post(rpc('tools/list'), { sessionId: id });
      assert.equal(res.status, 404, `session id ${id}`);
      await res.body?.cancel();
    }
  });

  // A version header the gateway does not serve is read as a later (stateless-era) client's:
  // 400 with -32022 and the revisions served per request (a 2025 client opens a session with
  // initialize instead), even beside a session id (basic/versioning §Protocol Version Negotiation).
  test('an unsupported MCP-Protocol-Version → 400 -32022 naming the revisions served', async () => {
    const res = await post(rpc('tools/list'), { sessionId: session, version: '1999-01-01' });
    assert.equal(res.status, 400);
    const answer = (await res.json()) as { error?: { code?: number; data?: { supported?: string[]; requested?: string } } };
    assert.equal(answer.error?.code, -32022);
    assert.equal(answer.error?.data?.requested, '1999-01-01');
    assert.ok(answer.error?.data?.supported?.includes('2026-07-28'), JSON.stringify(answer.error?.data));
  });

  test('a missing MCP-Protocol-Version header is accepted', async () => {
    const { status, answer } = await toolsList(session, { version: null });
    assert.equal(status, 200);
    assert.ok(Array.isArray((answer?.result as { tools?: unknown[] } | undefined)?.tools));
  });

  test("another user's session id → 404, and the session still works for its owner", async () => {
    const stolen = await toolsList(session, { token: bob });
    assert.equal(stolen.status, 404);
    const getAsBob = await get(session, { token: bob, signal: AbortSignal.timeout(REQUEST_MS) });
    assert.equal(getAsBob.status, 404);
    await getAsBob.body?.cancel();
    const deleteAsBob = await del(session, bob);
    assert.equal(deleteAsBob.status, 404);
    await deleteAsBob.body?.cancel();

    const mine = await toolsList(session);
    assert.equal(mine.status, 200);
    assert.ok(Array.isArray((mine.answer?.result as { tools?: unknown[] }).tools));
  });
});

describe('DNS-rebinding protection', () => {
  let session = '';
  before(async () => {
    session = await initSession();
  });

  test('a hostile Origin → 403; the gateway’s own origin is accepted', async () => {
    const hostile = await post(rpc('tools/list'), { sessionId: session, headers: { origin: 'https://evil.example' } });
    assert.equal(hostile.status, 403);
    await hostile.body?.cancel();
    const own = await toolsList(session, { headers: { origin: new URL(gateway!.url).origin } });
    assert.equal(own.status, 200);
  });

  // SPEC §2 asks for a 4xx; docs/configuration-reference.md (`allowedHosts`) names it: 421
  // Misdirected Request, with a JSON-RPC error body like every other refusal of /mcp.
  test('a Host header that is not ours → 421 Misdirected Request with a JSON-RPC Invalid Request error', async () => {
    const url = endpoint();
    const body = JSON.stringify(rpc('tools/list'));
    const answer = await new Promise<{ status: number; type: string | undefined; text: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: {
            host: 'evil.example',
            authorization: `Bearer ${alice}`,
            accept: ACCEPT_BOTH,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'mcp-session-id': session,
            'mcp-protocol-version': LATEST,
          },
          timeout: REQUEST_MS,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], text }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error('request timed out')));
      req.on('error', reject);
      req.end(body);
    });
    assert.equal(answer.status, 421, `Host: evil.example answered ${answer.status} ${answer.text}`);
    assert.match(answer.type ?? '', /^application\/json/);
    assert.deepEqual(JSON.parse(answer.text), { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Misdirected request: Host header not allowed' } });
  });
});

describe('GET stream and DELETE', () => {
  test('GET opens an SSE stream whose first event is a priming event (2025-11-25)', async (t) => {
    const session = await initSession();
    const controller = new AbortController();
    open.push(controller);
    t.after(() => controller.abort());
    const res = await get(session, { signal: controller.signal });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(res.headers.get('mcp-session-id'), session);
    const reader = new SseReader(res);
    const first = await reader.next(5_000);
    assert.ok(first, 'stream ended before its first event');
    assert.ok(first.id, `first event has an id: ${JSON.stringify(first)}`);
    assert.match(first.id, EVENT_ID);
    assert.ok(first.data === undefined || first.data === '', `priming event has empty data: ${JSON.stringify(first)}`);
    await reader.cancel();
  });

  test('a second concurrent GET on the same session → 409', async (t) => {
    const session = await initSession();
    const controller = new AbortController();
    open.push(controller);
    t.after(() => controller.abort());
    const first = await get(session, { signal: controller.signal });
    assert.equal(first.status, 200);
    const reader = new SseReader(first);
    await reader.next(5_000); // the stream is really open
    const second = await get(session, { signal: AbortSignal.timeout(REQUEST_MS) });
    assert.equal(second.status, 409);
    await second.body?.cancel();

    // Once the first stream is gone, the session may open a new one.
    controller.abort();
    await reader.cancel();
    const deadline = Date.now() + 5_000;
    let status = 0;
    while (Date.now() < deadline) {
      const retryController = new AbortController();
      open.push(retryController);
      const third = await get(session, { signal: retryController.signal });
      status = third.status;
      if (status === 200) {
        const events = new SseReader(third);
        assert.ok(await events.next(5_000), 'the new GET stream delivers its priming event');
        await events.cancel();
        retryController.abort();
        break;
      }
      await third.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(status, 200, 'a new GET after the first one closed');
  });

  test('two GETs sent at the same moment: one stream (200), the other 409', async (t) => {
    const session = await initSession();
    const controllers = [new AbortController(), new AbortController()];
    open.push(...controllers);
    t.after(() => controllers.forEach((c) => c.abort()));
    const responses = await Promise.all(controllers.map((c) => get(session, { signal: c.signal })));
    const statuses = responses.map((r) => r.status).sort();
    for (const r of responses) if (r.status !== 200) await r.body?.cancel();
    controllers.forEach((c) => c.abort());
    assert.deepEqual(statuses, [200, 409]);
  });

  test('GET without Accept: text/event-stream → 406', async () => {
    const session = await initSession();
    const res = await fetch(endpoint(), {
      method: 'GET',
      headers: { authorization: `Bearer ${alice}`, accept: 'application/json', 'mcp-session-id': session, 'mcp-protocol-version': LATEST },
      signal: AbortSignal.timeout(REQUEST_MS),
    });
    assert.equal(res.status, 406);
    await res.body?.cancel();
  });

  test('GET and DELETE on an unknown backend → 404', async () => {
    const session = await initSession();
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(endpoint('no-such-backend'), {
        method,
        headers: { authorization: `Bearer ${alice}`, accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': LATEST },
        signal: AbortSignal.timeout(REQUEST_MS),
      });
      assert.equal(res.status, 404, method);
      await res.body?.cancel();
    }
  });

  test('DELETE → 204, then the session is gone (404)', async () => {
    const session = await initSession();
    const res = await del(session);
    assert.equal(res.status, 204);
    await res.body?.cancel();
    assert.equal((await toolsList(session)).status, 404);
    const again = await del(session);
    assert.equal(again.status, 404);
    await again.body?.cancel();
  });
});

describe('JSON-RPC batches', () => {
  const batch = () => [rpc('tools/list'), rpc('ping')];

  test('refused (400) for a 2025-06-18 client that sends the version header', async () => {
    const session = await initSession(alice, '2025-06-18');
    const res = await post(batch(), { sessionId: session, version: '2025-06-18' });
    assert.equal(res.status, 400);
    assert.equal(await errorCodeOf(res), -32600);
  });

  test('refused (400) for a 2025-06-18 session even when the request omits the version header', async () => {
    // MCP 2025-11-25 Transports: the 2025-03-26 fallback applies only when the server has no
    // other way to know the version, e.g. the one negotiated at initialize.
    const session = await initSession(alice, '2025-06-18');
    const res = await post(batch(), { sessionId: session, version: null });
    const text = await res.text();
    assert.equal(res.status, 400, `a batch on a 2025-06-18 session was answered ${res.status}: ${text.slice(0, 300)}`);
    assert.equal((JSON.parse(text) as { error?: { code?: number } }).error?.code, -32600);
  });

  test('accepted for a 2025-03-26 client (control: batching itself is relayed)', async () => {
    const session = await initSession(alice, '2025-03-26');
    const requests = batch();
    const res = await post(requests, { sessionId: session, version: '2025-03-26' });
    assert.equal(res.status, 200);
    const type = res.headers.get('content-type') ?? '';
    let answers: Array<Record<string, unknown>>;
    if (type.startsWith('application/json')) {
      const body = (await res.json()) as Record<string, unknown> | Array<Record<string, unknown>>;
      answers = Array.isArray(body) ? body : [body];
    } else {
      const reader = new SseReader(res);
      const seen = new Set<unknown>();
      const events = await reader.until((e) => {
        const m = messageOf(e);
        for (const x of Array.isArray(m) ? m : [m]) if (x && 'id' in x) seen.add(x.id);
        return requests.every((r) => seen.has(r.id));
      });
      await reader.cancel();
      answers = events.flatMap((e) => {
        const m = messageOf(e) as unknown;
        return (Array.isArray(m) ? m : m ? [m] : []) as Array<Record<string, unknown>>;
      });
    }
    for (const r of requests) assert.ok(answers.some((a) => a.id === r.id && 'result' in a), `no result for ${r.method}: ${JSON.stringify(answers)}`);
  });
});

describe('SSE event ids and Last-Event-ID resumption', () => {
  test('SSE answers to POST carry ids of the form <16 hex>-<n>, increasing within the stream', async () => {
    const session = await initSession();
    const req = rpc('tools/call', { name: 'trigger-long-running-operation', arguments: { duration: 0.2, steps: 2 }, _meta: { progressToken: 'ids' } });
    const res = await post(req, { sessionId: session });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const reader = new SseReader(res);
    const events = await reader.until((e) => messageOf(e)?.id === req.id);
    await reader.cancel();
    const withData = events.filter((e) => messageOf(e) !== undefined);
    assert.equal(withData.length, 3, `2 progress notifications and the result: ${JSON.stringify(events)}`);
    const ids = events.filter((e) => e.id !== undefined).map((e) => e.id!);
    for (const e of withData) assert.match(e.id ?? '', EVENT_ID, `event without a proper id: ${JSON.stringify(e)}`);
    const streams = new Set(ids.map((id) => id.split('-')[0]));
    assert.equal(streams.size, 1, 'one stream id per stream');
    const seqs = ids.map((id) => Number(id.split('-')[1]));
    assert.deepEqual([...seqs].sort((a, b) => a - b), seqs, 'sequence numbers increase');
    assert.equal(new Set(seqs).size, seqs.length, 'ids are unique');
  });

  test('Last-Event-ID: a broken POST stream is resumed with GET, without loss or duplicates', async () => {
    const session = await initSession();
    const steps = 6;
    const req = rpc('tools/call', {
      name: 'trigger-long-running-operation',
      arguments: { duration: 3, steps },
      _meta: { progressToken: 'resume-me' },
    });
    const postAbort = new AbortController();
    open.push(postAbort);
    const res = await post(req, { sessionId: session, signal: postAbort.signal });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const reader = new SseReader(res);
    const before = await reader.until((e) => (messageOf(e)?.params as { progress?: number } | undefined)?.progress === 2, 10_000);
    const progressBefore = before.map((e) => (messageOf(e)?.params as { progress?: number } | undefined)?.progress).filter((x) => x !== undefined);
    assert.deepEqual(progressBefore, [1, 2]);
    const lastSeen = before.filter((e) => e.id).at(-1)!.id!;
    assert.match(lastSeen, EVENT_ID);
    postAbort.abort();
    await reader.cancel();

    const getAbort = new AbortController();
    open.push(getAbort);
    const resumed = await get(session, { lastEventId: lastSeen, signal: getAbort.signal });
    assert.equal(resumed.status, 200);
    assert.match(resumed.headers.get('content-type') ?? '', /^text\/event-stream/);
    const resumedReader = new SseReader(resumed);
    const after = await resumedReader.until((e) => messageOf(e)?.id === req.id, 15_000);
    getAbort.abort();
    await resumedReader.cancel();

    const messages = after.map(messageOf).filter((m) => m !== undefined);
    const progressAfter = messages.filter((m) => m.method === 'notifications/progress').map((m) => (m.params as { progress: number }).progress);
    assert.deepEqual(progressAfter, [3, 4, 5, 6], `resumed events: ${JSON.stringify(after)}`);
    const result = messages.find((m) => m.id === req.id);
    assert.ok(result, 'the final result arrived on the resumed stream');
    assert.match(JSON.stringify(result.result), /Long running operation completed/);

    const [stream, seqText] = lastSeen.split('-') as [string, string];
    const afterIds = after.filter((e) => messageOf(e) !== undefined).map((e) => e.id ?? '');
    for (const id of afterIds) {
      assert.match(id, EVENT_ID);
      assert.equal(id.split('-')[0], stream, 'same stream id after resumption');
      assert.ok(Number(id.split('-')[1]) > Number(seqText), `event ${id} is not after ${lastSeen}`);
    }
    assert.equal(new Set(afterIds).size, afterIds.length, 'no duplicate event ids');
  });

  test('Last-Event-ID after the stream has completed: the rest is replayed from the store, then the stream ends', async () => {
    const session = await initSession();
    const req = rpc('tools/call', {
      name: 'trigger-long-running-operation',
      arguments: { duration: 0.6, steps: 3 },
      _meta: { progressToken: 'replay-later' },
    });
    const postAbort = new AbortController();
    open.push(postAbort);
    const res = await post(req, { sessionId: session, signal: postAbort.signal });
    assert.equal(res.status, 200);
    const reader = new SseReader(res);
    const first = await reader.until((e) => messageOf(e)?.method === 'notifications/progress', 5_000);
    const lastSeen = first.filter((e) => e.id).at(-1)!.id!;
    postAbort.abort();
    await reader.cancel();
    // Let the operation finish while nobody listens (the gateway keeps reading the backend).
    await new Promise((resolve) => setTimeout(resolve, 1_500));

    const getAbort = new AbortController();
    open.push(getAbort);
    const resumed = await get(session, { lastEventId: lastSeen, signal: getAbort.signal });
    assert.equal(resumed.status, 200);
    const resumedReader = new SseReader(resumed);
    const events = await resumedReader.until(() => false, 5_000); // until the gateway ends the stream
    getAbort.abort();
    const messages = events.map(messageOf).filter((m) => m !== undefined);
    assert.deepEqual(
      messages.filter((m) => m.method === 'notifications/progress').map((m) => (m.params as { progress: number }).progress),
      [2, 3],
      `replayed: ${JSON.stringify(events)}`,
    );
    assert.ok(messages.some((m) => m.id === req.id && 'result' in m), 'the final result is replayed');
    const ids = events.filter((e) => messageOf(e)).map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, 'no duplicates');
  });

  test('a Last-Event-ID from another user or another session replays nothing of that stream', async () => {
    const owner = await initSession();
    // Progress before the result: a stream with ids (an answer of one event comes back as JSON, issue 29).
    const req = rpc('tools/call', { name: 'trigger-long-running-operation', arguments: { duration: 0.2, steps: 2 }, _meta: { progressToken: 'private' } });
    const res = await post(req, { sessionId: owner });
    const reader = new SseReader(res);
    const events = await reader.until((e) => messageOf(e)?.id === req.id);
    await reader.cancel();
    const primingId = events.find((e) => e.id)?.id;
    assert.ok(primingId, `the POST stream had event ids: ${JSON.stringify(events)}`);

    for (const [who, token] of [
      ['another session of the same user', alice],
      ['another user', bob],
    ] as const) {
      const other = await initSession(token);
      const controller = new AbortController();
      open.push(controller);
      const resumed = await get(other, { token, lastEventId: primingId, signal: controller.signal });
      if (resumed.status === 200) {
        const r = new SseReader(resumed);
        const seen: SseEvent[] = [];
        // Anything replayed would come at once; watch for a second.
        const stopAt = Date.now() + 1_000;
        while (Date.now() < stopAt) {
          const ev = await r.next(Math.max(1, stopAt - Date.now())).catch(() => undefined);
          if (!ev) break;
          seen.push(ev);
        }
        await r.cancel();
        assert.ok(
          !seen.some((e) => (e.data ?? '').includes('private to the owner')),
          `${who} got the owner's events: ${JSON.stringify(seen)}`,
        );
      } else {
        await resumed.body?.cancel();
        assert.ok(resumed.status >= 400 && resumed.status < 500, `${who}: HTTP ${resumed.status}`);
      }
      controller.abort();
    }
  });
});
