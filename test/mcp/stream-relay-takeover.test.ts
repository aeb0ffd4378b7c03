/**
 * Taking over a stream whose replay log lost its tail (src/streams/stream-relay.ts): a replica
 * that died may have sent events its appends had not stored yet. The relay that continues
 * from the log gets those events again from the backend, numbers them the same, stores them,
 * and does not send the client what its Last-Event-ID says it has. (End to end, with a
 * SIGKILLed replica: test/replicas/replicas.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import pino from 'pino';
import { syntheticBody } from '../../src/backends/body.js';
import type { SseWriter } from '../../src/streams/sse-writer.js';
import { StreamRelay } from '../../src/streams/stream-relay.js';
import { MemoryStore } from '../../src/state/memory-store.js';

/** Records what the relay writes to its client. */
function recordingWriter(): { writer: SseWriter; sent: Array<{ data: string; id?: string }> } {
  const sent: Array<{ data: string; id?: string }> = [];
  const writer = {
    message: (data: string, id?: string) => sent.push({ data, id }),
    prime: () => {},
    retry: () => {},
    end: () => {},
    onClose: () => {},
    closed: false,
  };
  return { writer: writer as unknown as SseWriter, sent };
}

describe('StreamRelay taking over from a log that lost its tail', () => {
  const store = new MemoryStore();
  after(() => store.close());

  test('events the client already has are stored under the same numbers but not sent again', async () => {
    const key = { userKey: 'u', sessionId: 's', streamId: '0123456789abcdef' };
    const limits = { maxEvents: 100, ttlMs: 60_000 };
    // The log as the dead replica left it: the meta entry and event 1 (backend id b1). The
    // client had also received event 2 (its Last-Event-ID), which never reached the log.
    await store.appendEvents(key, [{ seq: 0, meta: { kind: 'post', requestIds: [7] } }, { seq: 1, data: '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}', backendEventId: 'b1' }], limits);
    const relay = new StreamRelay(
      { store, limits, recentBytes: 1024 * 1024, retryMs: 1000, backend: 'resumable', log: pino({ level: 'silent' }), onBackendError: () => {} },
      key,
      { kind: 'post', requestIds: [7] },
      1,
      'b1',
    );
    relay.clientHasThrough(2);
    const { writer, sent } = recordingWriter();
    relay.attach(writer);
    // The backend resumed after b1 replays event 2, then goes on.
    const progress2 = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2}}';
    const result = '{"jsonrpc":"2.0","id":7,"result":{"content":[]}}';
    await relay.pump(syntheticBody(`id: b2\ndata: ${progress2}\n\nid: b3\ndata: ${result}\n\n`));
    await relay.flushed();

    assert.deepEqual(sent, [{ data: result, id: '0123456789abcdef-3' }], 'only what the client did not have');
    const stored = await store.readEvents(key);
    assert.deepEqual(
      stored.filter((e) => e.data).map((e) => [e.seq, e.data]),
      [
        [1, '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'],
        [2, progress2],
        [3, result],
      ],
      'the log is whole again, in order',
    );
    assert.ok(relay.finished, 'the open request was answered');
  });
});
