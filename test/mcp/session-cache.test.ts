/**
 * What a session record keeps and what the in-process cache of records holds (issue 13):
 * the cache is bounded in bytes as well as entries, and the client's capabilities are kept
 * as sent only while small — cut down to names and boolean flags otherwise, which still
 * tells URL-mode elicitation, sampling and roots apart.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { supportsUrlElicitation } from '../../src/connect/elicitation-replies.js';
import { MAX_STORED_CAPABILITIES_BYTES, storedClientCapabilities } from '../../src/sessions/client-capabilities.js';
import { SessionCache } from '../../src/sessions/session-cache.js';
import type { SessionRecord } from '../../src/state/store.js';

const record = (padding: number): SessionRecord => ({ backend: 'b', protocolVersion: '2025-11-25', clientCapabilities: { experimental: { pad: { p: 'x'.repeat(padding) } } }, createdAt: 0 });

describe('SessionCache', () => {
  test('holds at most maxBytes of records, dropping the oldest; a record over maxRecordBytes is not cached', () => {
    const cache = new SessionCache(60_000, { maxEntries: 1_000, maxBytes: 10_000, maxRecordBytes: 4_000 });
    for (let n = 0; n < 20; n++) cache.set('user', `s${n}`, record(1_000));
    assert.ok(cache.bytes <= 10_000, `${cache.bytes} bytes cached`);
    assert.ok(cache.size >= 8 && cache.size < 20, `${cache.size} records cached`);
    assert.notEqual(cache.get('user', 's19'), undefined, 'the newest stays');
    assert.equal(cache.get('user', 's0'), undefined, 'the oldest went');

    cache.set('user', 'huge', record(5_000));
    assert.equal(cache.get('user', 'huge'), undefined);
    cache.set('user', 's19', record(5_000));
    assert.equal(cache.get('user', 's19'), undefined, 'replacing a record with a huge one drops the old copy');
    const held = cache.bytes;
    cache.forget('user', 's18');
    assert.ok(cache.bytes < held, 'forgetting frees its bytes');
  });

  test("an entry is found only by its owner; another user's id neither reads nor forgets it", () => {
    // Keyed by the session id alone (issue 29): the owner's user key is compared on each read.
    const cache = new SessionCache(60_000);
    cache.set('alice-key', 'sid-1', record(10));
    assert.equal(cache.get('bob-key', 'sid-1'), undefined);
    cache.forget('bob-key', 'sid-1');
    assert.notEqual(cache.get('alice-key', 'sid-1'), undefined, "bob's forget left alice's entry");
    cache.forget('alice-key', 'sid-1');
    assert.equal(cache.get('alice-key', 'sid-1'), undefined);
    assert.equal(cache.bytes, 0);
  });

  test('a sweep drops the entries older than the max age, oldest first, and keeps the young ones (issue 45 §3)', () => {
    const cache = new SessionCache(5_000);
    for (let n = 0; n < 4; n++) cache.set('user', `s${n}`, record(10));
    cache.sweep(Date.now() + 1_000);
    assert.equal(cache.size, 4, 'young entries stay');
    cache.sweep(Date.now() + 5_001);
    assert.equal(cache.size, 0, 'every entry older than the max age went');
    assert.equal(cache.bytes, 0);
    cache.close();
  });

  test('still bounded by entries', () => {
    const cache = new SessionCache(60_000, { maxEntries: 3, maxBytes: 1_000_000, maxRecordBytes: 100_000 });
    for (let n = 0; n < 10; n++) cache.set('user', `s${n}`, record(10));
    assert.equal(cache.size, 3);
  });
});

describe('storedClientCapabilities', () => {
  test('small capabilities are kept as sent', () => {
    const capabilities = { elicitation: { form: { applyDefaults: true }, url: {} }, roots: { listChanged: true }, experimental: { x: { deep: [1, 2] } } };
    assert.deepEqual(storedClientCapabilities(capabilities), capabilities);
    assert.deepEqual(storedClientCapabilities(undefined), {});
    assert.deepEqual(storedClientCapabilities([1, 2]), {});
  });

  test('large ones keep the names of capabilities and flags (booleans as they are), within bounds', () => {
    const flags = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`flag${i}`, { v: i }]));
    const capabilities = {
      elicitation: { url: {}, form: { applyDefaults: true } },
      sampling: { tools: {} },
      roots: { listChanged: true },
      experimental: { blob: { data: 'x'.repeat(3 * 1024 * 1024) }, ...flags },
      ['n'.repeat(100)]: {},
    };
    const stored = storedClientCapabilities(capabilities);
    assert.ok(Buffer.byteLength(JSON.stringify(stored)) <= MAX_STORED_CAPABILITIES_BYTES);
    assert.ok(supportsUrlElicitation(stored));
    assert.deepEqual(stored.elicitation, { url: {}, form: {} });
    assert.deepEqual(stored.sampling, { tools: {} });
    assert.deepEqual(stored.roots, { listChanged: true });
    assert.equal(Object.keys(stored.experimental as object).length, 32);
    assert.deepEqual(Object.keys(stored).sort(), ['elicitation', 'experimental', 'roots', 'sampling'], 'a name over 64 characters is left out');
  });
});
