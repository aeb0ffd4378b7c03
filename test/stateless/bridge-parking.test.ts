/**
 * The bridge's parked calls (issue 15, "Bridging: 2026 client → 2025-11-25 backend"; src/stateless/
 * bridged-call.ts, bridge-resume.ts, bridge-replicas.ts): a 2025-11-25 SDK server that asks the
 * client during a tool call (sampling, elicitation, roots, on the call's own POST stream) reached
 * by a 2026-07-28 client on the raw wire, through two real gateway replicas on one real Redis.
 * The backend's question becomes an `input_required` result; the retry, on either replica,
 * answers the waiting backend handler and gets the rest of the call.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';
import { earlyClosesAt } from '../fixtures/stream-closes.js';

const CAPABILITIES = { elicitation: {}, sampling: {}, roots: {} };
const meta = (capabilities: Record<string, unknown> = CAPABILITIES) => ({
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': capabilities,
});

let oauth: OAuthHandle;
let redis: RedisHandle;
let backend: ConformanceServer;
let set: ReplicaSet;
let ada: string;
let bob: string;

before(async () => {
  [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startConformanceServer({ eras: '2025' })]);
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: oauth.issuer,
    backends: [{ name: 'asks', url: backend.url, protocol: '2025-11-25' }],
    // Replicas open each other's requestState: they share the key (SPEC §3 `secrets.tokenKey`).
    extra: { secrets: { tokenKey: randomBytes(32).toString('base64url') } },
  });
  [ada, bob] = await Promise.all([oauth.token({ sub: 'ada', aud: set.audience }), oauth.token({ sub: 'bob', aud: set.audience })]);
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([backend?.stop(), redis?.stop(), oauth?.stop()]);
});

interface Answer {
  status: number;
  id?: unknown;
  result?: Record<string, unknown> & { resultType?: string; inputRequests?: Record<string, { method: string; params: Record<string, unknown> }>; requestState?: string; content?: Array<{ text?: string }> };
  error?: { code: number; message: string; data?: Record<string, unknown> };
}

/** One stateless call on replica `replica`; an SSE answer is read to its last message (the answer). */
async function call(replica: number, id: number, tool: string, extra: Record<string, unknown> = {}, options: { bearer?: string; capabilities?: Record<string, unknown> } = {}): Promise<Answer> {
  const res = await fetch(set.endpoint(replica, 'asks'), {
    method: 'POST',
    headers: statelessHeaders(options.bearer ?? ada, 'tools/call', tool),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: {}, _meta: meta(options.capabilities), ...extra } }),
  });
  const text = await res.text();
  const body = res.headers.get('content-type')?.startsWith('text/event-stream')
    ? JSON.parse(text.split('\n').filter((line) => line.startsWith('data: ')).at(-1)!.slice('data: '.length))
    : JSON.parse(text);
  return { status: res.status, ...body };
}

const accept = (content: Record<string, unknown>) => ({ action: 'accept', content });

/** The retry of `switchboard_progress_after_input` on `replica`, answering its question (the call is held on replica 0). */
function progressRetry(replica: number, id: number, key: string, requestState: string, signal?: AbortSignal): Promise<Response> {
  return fetch(set.endpoint(replica, 'asks'), {
    method: 'POST',
    signal,
    headers: statelessHeaders(ada, 'tools/call', 'switchboard_progress_after_input'),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'switchboard_progress_after_input', arguments: {}, _meta: meta(), inputResponses: { [key]: accept({ name: 'Ida' }) }, requestState },
    }),
  });
}

describe('a 2025 backend asking during a call, through the bridge', () => {
  test('the question becomes input_required; the retry answers the waiting handler; the state serves once', async () => {
    const first = await call(0, 1, 'test_input_required_result_elicitation');
    assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first));
    const [key, ask] = Object.entries(first.result!.inputRequests!)[0]!;
    assert.equal(ask.method, 'elicitation/create');
    assert.equal(ask.params.message, 'What is your name?');
    const retry = { inputResponses: { [key]: accept({ name: 'Alice' }) }, requestState: first.result!.requestState };
    const done = await call(0, 2, 'test_input_required_result_elicitation', retry);
    assert.deepEqual([done.id, done.result?.resultType, done.result?.content?.[0]?.text], [2, 'complete', 'Hello, Alice!']);
    const again = await call(0, 3, 'test_input_required_result_elicitation', retry);
    assert.deepEqual([again.status, again.id, again.error?.code], [200, 3, -32602]);
    assert.match(again.error!.message, /no longer waiting/);
  });

  test('rounds alternate between replicas: each retry reaches the call on the replica that holds it', async () => {
    const round1 = await call(0, 10, 'test_input_required_result_multi_round');
    const [step1] = Object.keys(round1.result!.inputRequests!);
    const round2 = await call(1, 11, 'test_input_required_result_multi_round', { inputResponses: { [step1!]: accept({ name: 'Grace' }) }, requestState: round1.result!.requestState });
    assert.equal(round2.result?.resultType, 'input_required', JSON.stringify(round2));
    const [step2, ask2] = Object.entries(round2.result!.inputRequests!)[0]!;
    assert.equal(ask2.params.message, 'Step 2: What is your favorite color?');
    const round3 = await call(1, 12, 'test_input_required_result_multi_round', { inputResponses: { [step2]: accept({ color: 'green' }) }, requestState: round2.result!.requestState });
    assert.deepEqual([round3.id, round3.result?.content?.[0]?.text], [12, 'Multi-round complete for Grace who likes green']);
  });

  test('asks sent together come in one round; what the retry leaves unanswered is asked again, alone', async () => {
    const first = await call(1, 20, 'test_input_required_result_multiple_inputs');
    const asks = first.result!.inputRequests!;
    assert.deepEqual(Object.values(asks).map((a) => a.method).sort(), ['elicitation/create', 'roots/list', 'sampling/createMessage']);
    const keyOf = (method: string) => Object.keys(asks).find((k) => asks[k]!.method === method)!;
    const partial = await call(0, 21, 'test_input_required_result_multiple_inputs', {
      inputResponses: { [keyOf('elicitation/create')]: accept({ name: 'Lin' }), unrelated: accept({}) },
      requestState: first.result!.requestState,
    });
    assert.equal(partial.result?.resultType, 'input_required');
    assert.deepEqual(Object.keys(partial.result!.inputRequests!).sort(), [keyOf('roots/list'), keyOf('sampling/createMessage')].sort());
    const done = await call(0, 22, 'test_input_required_result_multiple_inputs', {
      inputResponses: {
        [keyOf('sampling/createMessage')]: { role: 'assistant', content: { type: 'text', text: 'Hi there' }, model: 'm', stopReason: 'endTurn' },
        [keyOf('roots/list')]: { roots: [{ uri: 'file:///a', name: 'a' }, { uri: 'file:///b', name: 'b' }] },
      },
      requestState: partial.result!.requestState,
    });
    assert.equal(done.result?.content?.[0]?.text, 'Name: Lin; Greeting: Hi there; Roots: 2');
  });

  test('another user cannot continue the call; its owner still can', async () => {
    const first = await call(0, 30, 'test_input_required_result_list_roots');
    assert.equal(first.result?.resultType, "input_required", JSON.stringify(first));
    const [key] = Object.keys(first.result!.inputRequests!);
    const retry = { inputResponses: { [key!]: { roots: [] } }, requestState: first.result!.requestState };
    const stolen = await call(1, 31, 'test_input_required_result_list_roots', retry, { bearer: bob });
    assert.deepEqual([stolen.status, stolen.error?.code], [200, -32602]);
    const owner = await call(1, 32, 'test_input_required_result_list_roots', retry);
    assert.equal(owner.result?.content?.[0]?.text, 'Found 0 root(s)');
  });

  test('a handed-over attempt streams: progress reaches the client while the call still runs on the other replica', async () => {
    const first = await call(0, 50, 'switchboard_progress_after_input', { _meta: { ...meta(), progressToken: 'p-50' } });
    const [key] = Object.keys(first.result!.inputRequests!);
    const res = await progressRetry(1, 51, key!, first.result!.requestState!);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const events = new SseReader(res);
    const heard: Array<{ at: number; message: Record<string, unknown> }> = [];
    for (let n = 0; n < 10; n++) {
      const event = await events.next();
      if (!event) break;
      const message = messageOf(event);
      if (!message) continue;
      heard.push({ at: Date.now(), message });
      if ('result' in message || 'error' in message) break;
    }
    assert.deepEqual(heard.map((h) => h.message.method ?? 'answer'), ['notifications/progress', 'notifications/progress', 'answer']);
    assert.equal((heard.at(-1)!.message.result as { content: Array<{ text: string }> }).content[0]!.text, 'Done for Ida');
    // The backend waits 300 ms after each notification: the first came well before the answer, not with it.
    assert.ok(heard.at(-1)!.at - heard[0]!.at >= 400, `progress ${heard.at(-1)!.at - heard[0]!.at} ms before the answer`);
  });

  for (const [replica, where] of [
    [1, 'a handed-over attempt leaving stops the call on the replica that holds it'],
    [0, 'an attempt leaving on the replica that holds the call stops it'],
  ] as const) {
    test(`the client of ${where}: the backend stream is closed`, async () => {
      const first = await call(0, 60 + 2 * replica, 'switchboard_progress_after_input', { _meta: { ...meta(), progressToken: `p-6${replica}` } });
      const [key] = Object.keys(first.result!.inputRequests!);
      const before = await earlyClosesAt(backend.url);
      const controller = new AbortController();
      const res = await progressRetry(replica, 61 + 2 * replica, key!, first.result!.requestState!, controller.signal);
      const events = new SseReader(res);
      const heard = messageOf((await events.next())!);
      assert.equal(heard?.method, 'notifications/progress', 'the attempt runs on the holder');
      controller.abort();
      // Read to its end (600 ms after the answer), the backend's stream would not count as closed
      // early, however long this waits: up to 10 s, for a loaded machine (2 s once failed there).
      let after = before;
      for (let n = 0; n < 200 && after === before; n++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        after = await earlyClosesAt(backend.url);
      }
      assert.ok(after > before, 'the holder closed the backend stream of the attempt its client left');
    });
  }

  test('calls running at once in one session each get the requests the backend sends on its GET stream: a call alone in a backend session of its own', async () => {
    // Sampling comes on the session's standalone GET stream, naming no call: two calls sharing one backend session could not tell whose it is.
    const cy = await oauth.token({ sub: 'cy', aud: set.audience });
    const tool = 'test_input_required_result_sampling';
    const firsts = await Promise.all([70, 71, 72].map((id) => call(0, id, tool, {}, { bearer: cy })));
    for (const first of firsts) assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first));
    const sampled = (text: string) => ({ role: 'assistant', content: { type: 'text', text }, model: 'm', stopReason: 'endTurn' });
    const dones = await Promise.all(
      firsts.map((first, n) => {
        const [key] = Object.keys(first.result!.inputRequests!);
        return call(0, 80 + n, tool, { inputResponses: { [key!]: sampled(`answer ${n}`) }, requestState: first.result!.requestState }, { bearer: cy });
      }),
    );
    assert.deepEqual(
      dones.map((done) => done.result?.content?.[0]?.text),
      [0, 1, 2].map((n) => `Sampling result: answer ${n}`),
    );
  });

  test('a question for a capability the client did not declare: HTTP 400 -32021 with requiredCapabilities', async () => {
    const refused = await call(0, 40, 'test_missing_capability', {}, { capabilities: { elicitation: {} } });
    assert.deepEqual([refused.status, refused.id, refused.error?.code], [400, 40, -32021]);
    assert.deepEqual(refused.error?.data?.requiredCapabilities, { sampling: {} });
  });
});
