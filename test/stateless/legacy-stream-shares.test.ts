/**
 * The share protocol of src/stateless/legacy-stream-shares.ts between two replicas, their
 * messages carried in process as the coordinator would carry them: the reader passes
 * notifications on until the listener leaves, tells it when the stream ends, and a listen
 * nobody can serve fails after the wait instead of hanging.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { BackendMessage } from '../../src/backends/backend-messages.js';
import type { BridgeMessage } from '../../src/state/coordinator.js';
import { isShareMessage, SHARE_TIMEOUT_MS, StreamShares } from '../../src/stateless/legacy-stream-shares.js';

/** Two replicas: `reader` reads the stream of `key` (listeners in `readers`), `other` listens through it. */
function pair(key: string, reads = true) {
  const readers = new Set<(m: BackendMessage) => void>();
  const ends = new Set<() => void>();
  const replicas = new Map<string, StreamShares>();
  const deliver = (to: string, message: BridgeMessage) => {
    if (isShareMessage(message)) setImmediate(() => replicas.get(to)?.handle(message));
  };
  const coordinatorOf = (replicaId: string) => ({
    replicaId,
    broadcast: async (message: BridgeMessage) => [...replicas.keys()].forEach((id) => deliver(id, message)),
    send: async (to: string, message: BridgeMessage) => deliver(to, message),
  });
  const attach = (asked: string, listener: (m: BackendMessage) => void, onEnd: () => void) => {
    if (!reads || asked !== key) return undefined;
    readers.add(listener);
    ends.add(onEnd);
    return () => void readers.delete(listener);
  };
  replicas.set('reader', new StreamShares(coordinatorOf('reader'), attach));
  replicas.set('other', new StreamShares(coordinatorOf('other'), () => undefined));
  const hear = (message: BackendMessage) => [...readers].forEach((listener) => listener(message));
  const endStream = () => [...ends].forEach((end) => end());
  return { other: replicas.get('other')!, readers, hear, endStream };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const change = { jsonrpc: '2.0', method: 'notifications/tools/list_changed' } as BackendMessage;

describe('listening through the replica that reads the stream', () => {
  it('notifications pass on until the listener leaves; then the reader lets go', async () => {
    const { other, readers, hear } = pair('s1');
    const heard: BackendMessage[] = [];
    const listening = await other.listen('s1', (m) => heard.push(m));
    assert.equal(listening.opened, true);
    assert.equal(readers.size, 1);
    hear(change);
    await settle();
    assert.deepEqual(heard, [change]);
    listening.detach();
    await settle();
    assert.equal(readers.size, 0, 'the reader dropped the share');
    hear(change);
    await settle();
    assert.equal(heard.length, 1);
  });

  it('the stream\'s end reaches the listener', async () => {
    const { other, endStream } = pair('s2');
    const listening = await other.listen('s2', () => {});
    let ended = false;
    void listening.ended.then(() => (ended = true));
    endStream();
    await settle();
    assert.equal(ended, true);
  });

  it('with no replica reading the stream the listen fails after the wait', async () => {
    const { other } = pair('s3', false);
    const started = Date.now();
    const listening = await other.listen('s3', () => {});
    assert.equal(listening.opened, false);
    assert.ok(Date.now() - started >= SHARE_TIMEOUT_MS - 50);
  });
});
