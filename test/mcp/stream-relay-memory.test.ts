/**
 * What a relay keeps in memory for clients that attach to it here (src/streams/stream-relay.ts,
 * issue 13 "Replay logs"): recent events bounded in bytes (`streams.replayBytes`) as well as
 * in count, the newest kept whatever its size. A late client still gets the newest events;
 * a stream of big events does not grow the gateway's memory without bound.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import pino from 'pino';
import type { SseWriter } from '../../src/streams/sse-writer.js';
import { StreamRelay } from '../../src/streams/stream-relay.js';
import { MemoryStore } from '../../src/state/memory-store.js';

const store = new MemoryStore();
after(() => store.close());

test('a relay keeps at most recentBytes of recent events in memory, newest first', async () => {
  const relay = new StreamRelay(
    { store, limits: { maxEvents: 1000, ttlMs: 60_000 }, recentBytes: 300, retryMs: 1000, backend: 'b', log: pino({ level: 'silent' }), onBackendError: () => {} },
    { userKey: 'u', sessionId: 's', streamId: 'standalone00000a' },
    { kind: 'get', requestIds: [] },
  );
  const event = (n: number) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: `${n}`.padEnd(60, '.') } });
  for (let n = 1; n <= 10; n++) relay.inject(event(n));
  const sent: string[] = [];
  const writer = { message: (data: string) => sent.push(data), prime: () => {}, retry: () => {}, end: () => {}, onClose: () => {}, closed: false };
  relay.attach(writer as unknown as SseWriter);
  // Each event is 131 bytes: two fit in 300, three do not.
  assert.deepEqual(sent, [event(9), event(10)]);
  relay.stop();
  await relay.flushed();
  assert.equal((await store.readEvents({ userKey: 'u', sessionId: 's', streamId: 'standalone00000a' })).filter((e) => e.data).length, 10, 'the stored log is bounded by its own budget, not this one');
});
