/**
 * One user must not fill the store for everyone (issue 13 §2), through the real gateway on a
 * real Redis, with a real SDK backend (test/fixtures/paging-backend.ts):
 *
 * - sessions: at most `sessions.maxPerUser` per user, the least recently used ended as if
 *   deleted (its standalone stream stops, its backend session is DELETEd, its id gets 404), another user
 *   untouched; a 3 MiB `capabilities` object is not stored, while what the gateway reads of it
 *   (URL-mode elicitation) is;
 * - replay logs: 20 tool answers stay within `streams.replayBytesPerUser`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Redis } from 'ioredis';
import { parseConfig } from '../../src/config/load.js';
import { supportsUrlElicitation } from '../../src/connect/elicitation-replies.js';
import type { SessionRecord } from '../../src/state/store.js';
import type { PagingBackend } from '../fixtures/paging-backend.js';
import { waitUntil } from '../helpers/child.js';
import type { GatewayHandle } from '../helpers/gateway.js';
import type { OAuthHandle } from '../helpers/oauth.js';
import { startPagingGateway, type PagingGateway } from '../helpers/paging-gateway.js';
import { SseReader } from '../helpers/sse-client.js';
import { SESSION_VERSION as VERSION, sessionClient } from '../helpers/session-client.js';

const MAX_PER_USER = 3;

let stack: PagingGateway | undefined;
let oauth: OAuthHandle;
let backend: PagingBackend;
let gateway: GatewayHandle;
let client: Redis;

before(async () => {
  stack = await startPagingGateway({
    sessions: { maxPerUser: MAX_PER_USER },
    streams: { replayBytes: 64 * 1024, replayBytesPerUser: 256 * 1024 },
    limits: { maxBodyBytes: 4 * 1024 * 1024, rateLimit: { enabled: false } },
  });
  ({ oauth, backend, gateway, client } = stack);
});

after(async () => {
  await stack?.stop();
});

const { post, initialize, pingStatus } = sessionClient(() => gateway.endpoint('paging'), 'budget-test');

/** The gateway's keys of one kind (`s`, `e`, …) in Redis, with the bytes of their values. */
async function storedBytes(kind: 's' | 'e'): Promise<{ keys: string[]; bytes: number }> {
  const keys: string[] = [];
  let cursor = '0';
  let rounds = 0;
  do {
    const [next, found] = await client.scan(cursor, 'MATCH', `${gateway.config.redis!.keyPrefix}${kind}:*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== '0' && ++rounds < 100);
  let bytes = 0;
  for (const key of keys) {
    if (kind === 's') bytes += await client.strlen(key);
    else for (const entry of await client.lrange(key, 0, -1)) bytes += Buffer.byteLength(entry);
  }
  return { keys, bytes };
}

describe('/mcp keeps little of the client', () => {
  test('a 1 MiB clientInfo through the aggregated endpoint is not stored whole', { timeout: 60_000 }, async () => {
    const dora = await oauth.token({ sub: `dora-${Date.now()}`, aud: gateway.audience });
    const before = await storedBytes('s');
    const res = await fetch(new URL('/mcp', gateway.url), {
      method: 'POST',
      headers: { authorization: `Bearer ${dora}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'big', version: '1', blob: 'x'.repeat(1024 * 1024) } } }),
      signal: AbortSignal.timeout(20_000),
    });
    assert.equal(res.status, 200);
    await res.text();
    const after = await storedBytes('s');
    assert.equal(after.keys.length, before.keys.length + 1);
    assert.ok(after.bytes - before.bytes < 16 * 1024, `${after.bytes - before.bytes} bytes stored for one /mcp session`);
  });
});

describe('sessions.maxPerUser', () => {
  test("a user's sessions beyond the cap end as if deleted, streams stopped — in use, least recently used first; another user keeps theirs", { timeout: 90_000 }, async () => {
    const alice = await oauth.token({ sub: `alice-${Date.now()}`, aud: gateway.audience });
    const bob = await oauth.token({ sub: `bob-${Date.now()}`, aud: gateway.audience });
    const bobs = await initialize(bob);
    const before = backend.sessions();

    // Every session holds its standalone stream: all are in use, so the least recently used of
    // them go (with an idle one, that one would: test/mcp/session-eviction.test.ts).
    const sessions: string[] = [];
    const streams: SseReader[] = [];
    for (let n = 0; n < MAX_PER_USER + 2; n++) {
      const id = await initialize(alice);
      const get = await fetch(gateway.endpoint('paging'), {
        headers: { authorization: `Bearer ${alice}`, accept: 'text/event-stream', 'mcp-session-id': id, 'mcp-protocol-version': VERSION },
        signal: AbortSignal.timeout(30_000),
      });
      assert.equal(get.status, 200);
      sessions.push(id);
      streams.push(new SseReader(get));
    }

    const [evicted1, evicted2, ...kept] = sessions;
    // until() returns when the stream ends; it throws if it is still open after 10 s.
    for (const stream of streams.slice(0, 2)) await stream.until(() => false, 10_000);
    for (const id of [evicted1!, evicted2!]) assert.equal(await pingStatus(alice, id), 404, 'an evicted session is gone');
    for (const id of kept) assert.equal(await pingStatus(alice, id), 200, 'the most recently used sessions work');
    assert.equal(await pingStatus(bob, bobs), 200, "bob's session is not alice's to lose");
    await waitUntil(async () => (backend.sessions() === before + MAX_PER_USER ? true : undefined), { what: 'the evicted backend sessions to be deleted', timeoutMs: 10_000, intervalMs: 50 });
    for (const stream of streams.slice(2)) await stream.cancel();
  });

  test('3 MiB of client capabilities are not stored; URL-mode elicitation is still known', { timeout: 90_000 }, async () => {
    const carol = await oauth.token({ sub: `carol-${Date.now()}`, aud: gateway.audience });
    const capabilities = { elicitation: { form: {}, url: {} }, sampling: {}, roots: { listChanged: true }, experimental: { blob: { data: 'x'.repeat(3 * 1024 * 1024) } } };
    const before = await storedBytes('s');
    for (let n = 0; n < MAX_PER_USER; n++) await initialize(carol, capabilities);
    const after = await storedBytes('s');
    assert.ok(after.bytes - before.bytes <= MAX_PER_USER * 20 * 1024, `${after.bytes - before.bytes} bytes stored for ${MAX_PER_USER} sessions`);
    const added = after.keys.filter((k) => !before.keys.includes(k));
    assert.equal(added.length, MAX_PER_USER);
    for (const key of added) {
      const record = JSON.parse((await client.get(key))!) as SessionRecord;
      assert.ok(supportsUrlElicitation(record.clientCapabilities), JSON.stringify(record.clientCapabilities));
      assert.deepEqual(Object.keys(record.clientCapabilities).sort(), ['elicitation', 'experimental', 'roots', 'sampling']);
      assert.deepEqual(record.clientCapabilities.roots, { listChanged: true });
    }
  });

  test('config: sessions.maxPerUser and the replay budgets are validated by name', () => {
    const base = { publicUrl: 'http://127.0.0.1:1', auth: { issuer: 'http://127.0.0.1:9', audience: 'a' }, backends: [{ name: 'demo', url: 'http://127.0.0.1:9/mcp' }] };
    const defaults = parseConfig(base);
    assert.equal(defaults.sessions.maxPerUser, 100);
    assert.equal(defaults.streams.replayBytes, 1024 * 1024);
    assert.equal(defaults.streams.replayBytesPerUser, 8 * 1024 * 1024);
    assert.throws(() => parseConfig({ ...base, sessions: { maxPerUser: 0 } }), /sessions\.maxPerUser: must be at least 1/);
    assert.throws(() => parseConfig({ ...base, streams: { replayBytes: 100 } }), /streams\.replayBytes: must be at least 1024 bytes/);
    assert.throws(() => parseConfig({ ...base, streams: { replayBytes: 4096, replayBytesPerUser: 2048 } }), /streams\.replayBytesPerUser: must be at least streams\.replayBytes/);
    assert.equal(parseConfig({ ...base, sessions: { maxPerUser: '7' } }).sessions.maxPerUser, 7);
  });
});

describe('streams.replayBytesPerUser', () => {
  test("20 answers of 40 kB keep at most the user's budget in the replay logs", { timeout: 90_000 }, async () => {
    const dave = await oauth.token({ sub: `dave-${Date.now()}`, aud: gateway.audience });
    const sessionId = await initialize(dave);
    const before = await storedBytes('e');
    for (let n = 0; n < 20; n++) {
      // Answers that arrive in two turns are kept for replay; one written whole in one turn
      // is not (nothing could resume it: test/streams/answered-whole.test.ts).
      const res = await post(dave, { jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: 'slow', arguments: { pad: 'y'.repeat(40_000) } } }, sessionId);
      assert.equal(res.status, 200);
      assert.ok((await res.text()).includes('y'.repeat(40_000)), 'the answer is delivered whole');
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    const after = await storedBytes('e');
    assert.ok(after.bytes - before.bytes <= 256 * 1024, `${after.bytes - before.bytes} bytes of replay logs for 20 answers of 40 kB`);
    assert.ok(after.bytes - before.bytes >= 40_000, 'the newest answers are still kept for resumption');
  });
});
