/**
 * Which session `sessions.maxPerUser` ends (issue 28 §7; SPEC §8 "Budgets"), through the real
 * gateway over HTTP on a real Redis, with a real SDK backend (test/fixtures/paging-backend.ts)
 * and the default cap (100).
 *
 * Clients leave sessions behind without a DELETE (mcp-remote's probe, one per Inspector CLI
 * command). A user who does that 150 times must keep the sessions they are using: one with
 * its GET stream open, one with a call in flight. The abandoned ones go, least recently used
 * first. (Use by quick calls is recorded when a replica reads the session from the store, at
 * most every 5 s per replica — the session cache — so a burst of 100 sessions within those
 * seconds outruns it; the store contract tests that order: test/state/store-contract.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { waitUntil } from '../helpers/child.js';
import { startPagingGateway, type PagingGateway } from '../helpers/paging-gateway.js';
import { SseReader } from '../helpers/sse-client.js';
import { SESSION_VERSION as VERSION, sessionClient } from '../helpers/session-client.js';

const ABANDONED = 150;

let stack: PagingGateway;

before(async () => {
  // sessions.maxPerUser stays at its default; the rate limit would slow 150 initializes down.
  stack = await startPagingGateway({ limits: { rateLimit: { enabled: false } } });
});

after(() => stack?.stop());

const { post, initialize, pingStatus } = sessionClient(() => stack.gateway.endpoint('paging'), 'eviction-test');

/** Whether the store holds an in-use mark for this session (the replica's renewal wrote it). */
async function markedInUse(sessionId: string): Promise<boolean> {
  const [, keys] = await stack.client.scan('0', 'MATCH', `${stack.gateway.config.redis!.keyPrefix}su:*`, 'COUNT', 1000);
  for (const key of keys) if ((await stack.client.zscore(key, sessionId)) !== null) return true;
  return false;
}

/** Leaves ABANDONED sessions behind; returns them in creation order. */
async function abandonSessions(token: string): Promise<string[]> {
  const abandoned: string[] = [];
  for (let n = 0; n < ABANDONED; n++) abandoned.push(await initialize(token));
  return abandoned;
}

/** The `evicted` least recently used abandoned sessions are gone (404), the rest answer. */
async function assertLeastRecentlyUsedWent(token: string, abandoned: string[], evicted: number): Promise<void> {
  for (const [n, id] of abandoned.entries()) {
    assert.equal(await pingStatus(token, id), n < evicted ? 404 : 200, `abandoned session ${n}: the ${evicted} least recently used go`);
  }
}

describe('sessions.maxPerUser (default 100) ends abandoned sessions, not the ones in use', () => {
  test(`a session with its GET stream open survives ${ABANDONED} abandoned sessions of the same user`, { timeout: 120_000 }, async () => {
    const eve = await stack.oauth.token({ sub: `eve-${Date.now()}`, aud: stack.gateway.audience });
    assert.equal(stack.gateway.config.sessions.maxPerUser, 100, 'the default cap');
    const streaming = await initialize(eve);
    const get = await fetch(stack.gateway.endpoint('paging'), {
      headers: { authorization: `Bearer ${eve}`, accept: 'text/event-stream', 'mcp-session-id': streaming, 'mcp-protocol-version': VERSION },
      signal: AbortSignal.timeout(110_000),
    });
    assert.equal(get.status, 200);
    const stream = new SseReader(get);

    const abandoned = await abandonSessions(eve);

    assert.equal(await pingStatus(eve, streaming), 200, 'the session with an open stream is kept');
    await assertLeastRecentlyUsedWent(eve, abandoned, 1 + ABANDONED - 100);
    await stream.cancel();
  });

  test(`a session with a call in flight survives ${ABANDONED} abandoned sessions of the same user, and the call gets its answer`, { timeout: 120_000 }, async () => {
    const fay = await stack.oauth.token({ sub: `fay-${Date.now()}`, aud: stack.gateway.audience });
    const calling = await initialize(fay);
    const call = post(fay, { jsonrpc: '2.0', id: 'held', method: 'tools/call', params: { name: 'hold', arguments: {} } }, calling, AbortSignal.timeout(110_000));
    await waitUntil(async () => (stack.backend.held() === 1 ? true : undefined), { what: 'the held call to reach the backend', timeoutMs: 10_000, intervalMs: 25 });
    // A call is marked in use once a renewal (every ~3 s) finds it still in flight.
    await waitUntil(async () => ((await markedInUse(calling)) ? true : undefined), { what: 'the call in flight to be marked in use', timeoutMs: 15_000, intervalMs: 100 });

    const abandoned = await abandonSessions(fay);

    assert.equal(await pingStatus(fay, calling), 200, 'the session with a call in flight is kept');
    await assertLeastRecentlyUsedWent(fay, abandoned, 1 + ABANDONED - 100);
    stack.backend.releaseHeld();
    const answer = await call;
    assert.equal(answer.status, 200);
    assert.match(await answer.text(), /released/, 'the call in flight got its answer');
  });
});
