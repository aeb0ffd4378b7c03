/**
 * The bodies that watch an answer pass (src/backends/body.ts `tappedBody`, `watchedBody`,
 * src/backends/sse-tapped-body.ts) hand
 * the reader the source's own `bytes()` promise and watch it by a reaction added first (issue 44
 * part 1: no promise more resolved with the bytes). What that must keep: the watcher has seen
 * the bytes, or the end, before the reader goes on; the reader gets exactly the source's bytes
 * or its error; a watcher that throws costs the reader nothing and leaves no unhandled rejection;
 * `settled` comes once.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { syntheticBody, tappedBody, watchedBody, type BackendBody } from '../../src/backends/body.js';
import { sseTappedBody } from '../../src/backends/sse-tapped-body.js';

const TEXT = '{"jsonrpc":"2.0","id":1,"result":{"content":[]}}';

/** A source body whose `bytes()` fails as a backend that dropped the connection does. */
function failingBody(error: Error): BackendBody {
  const body = syntheticBody('unused');
  body.bytes = () => Promise.reject(error);
  return body;
}

/** A tap that throws at every message: the reader of the body `make` builds on it still reads `text`, and `settled` comes once. */
async function readsPastThrowingTap(make: (tap: { throwing: () => never; settled: () => void }) => BackendBody, text: string): Promise<void> {
  let settled = 0;
  const body = make({
    throwing: () => {
      throw new Error('observer defect');
    },
    settled: () => settled++,
  });
  assert.equal(Buffer.from(await body.bytes()).toString('utf8'), text);
  assert.equal(settled, 1);
}

let unhandled: unknown[];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
beforeEach(() => {
  unhandled = [];
  process.on('unhandledRejection', onUnhandled);
});
afterEach(async () => {
  // Rejections are reported after the microtasks of the turn that left them.
  await new Promise((resolve) => setImmediate(resolve));
  process.off('unhandledRejection', onUnhandled);
  assert.deepEqual(unhandled, [], 'no unhandled rejection');
});

describe('tappedBody', () => {
  it('tells the tap the bytes before the reader goes on, then settles once', async () => {
    const events: string[] = [];
    const body = tappedBody(syntheticBody(TEXT), { onBytes: (b) => events.push(`bytes ${b.toString('utf8')}`), settled: () => events.push('settled') });
    const read = await body.bytes();
    events.push('reader');
    assert.equal(Buffer.from(read).toString('utf8'), TEXT);
    assert.deepEqual(events, [`bytes ${TEXT}`, 'settled', 'reader']);
    body.destroy();
    assert.deepEqual(events, [`bytes ${TEXT}`, 'settled', 'reader'], 'settled only once');
  });

  it('hands the reader the bytes when the tap throws, and still settles', async () => {
    await readsPastThrowingTap((tap) => tappedBody(syntheticBody(TEXT), { onBytes: tap.throwing, settled: tap.settled }), TEXT);
  });

  it('gives the reader the source error, tells no bytes, and settles', async () => {
    const told: Buffer[] = [];
    let settled = 0;
    const body = tappedBody(failingBody(new Error('backend went away')), { onBytes: (b) => told.push(b), settled: () => settled++ });
    await assert.rejects(body.bytes(), /backend went away/);
    assert.deepEqual(told, []);
    assert.equal(settled, 1);
  });
});

describe('watchedBody', () => {
  it('tells the end before the reader goes on', async () => {
    const events: string[] = [];
    const body = watchedBody(syntheticBody(TEXT), (error) => events.push(error ? 'failed' : 'ended'), () => events.push('dropped'));
    const read = await body.bytes();
    events.push('reader');
    assert.equal(Buffer.from(read).toString('utf8'), TEXT);
    assert.deepEqual(events, ['ended', 'reader']);
  });

  it('tells the source error and passes it to the reader', async () => {
    const ends: unknown[] = [];
    let dropped = 0;
    const error = new Error('backend went away');
    const body = watchedBody(failingBody(error), (e) => ends.push(e), () => dropped++);
    await assert.rejects(body.bytes(), /backend went away/);
    assert.deepEqual(ends, [error]);
    assert.equal(dropped, 0);
  });

  it('hands the reader the bytes when the watcher throws', async () => {
    const body = watchedBody(
      syntheticBody(TEXT),
      () => {
        throw new Error('watcher defect');
      },
      () => assert.fail('a read to the end is not a drop'),
    );
    assert.equal(Buffer.from(await body.bytes()).toString('utf8'), TEXT);
  });
});

describe('sseTappedBody', () => {
  const EVENT = `event: message\ndata: ${TEXT}\n\n`;

  it('tells the event before the reader goes on', async () => {
    const events: string[] = [];
    const body = sseTappedBody(syntheticBody(EVENT), { onText: (data, whole) => events.push(`${whole ? 'whole' : 'part'} ${data}`), settled: () => events.push('settled') });
    const read = await body.bytes();
    events.push('reader');
    assert.equal(Buffer.from(read).toString('utf8'), EVENT);
    assert.deepEqual(events, [`whole ${TEXT}`, 'settled', 'reader']);
  });

  it('hands the reader the bytes when the tap throws, and still settles', async () => {
    await readsPastThrowingTap((tap) => sseTappedBody(syntheticBody(EVENT), { onText: tap.throwing, settled: tap.settled }), EVENT);
  });
});
