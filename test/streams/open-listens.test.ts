/**
 * The open listens of a replica (src/streams/open-listens.ts) and a relayed 2026 listen
 * (src/stateless/relayed-listen.ts): a notice reaches only listens of the endpoint that asked
 * for that list, tagged with their subscription id; in a relayed stream it goes between the
 * backend's events, and the listen is kept only from the backend's acknowledgement to the
 * stream's end.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { OpenListens, listsAsked, type ListKind } from '../../src/streams/open-listens.js';
import { RelayedListen } from '../../src/stateless/relayed-listen.js';
import { formatSseEvent } from '../../src/wire/sse.js';

const listen = (listens: OpenListens, userKey: string, endpoint: string, lists: ListKind[], subscriptionId: string, heard: string[]) =>
  listens.add({ userKey, endpoint, lists: new Set(lists), subscriptionId, write: (m) => heard.push(m), end: () => heard.push('end') });

describe('open listens', () => {
  test('a notice goes to the listens of its endpoint that asked for that list, tagged with each one\'s subscription id', () => {
    const listens = new OpenListens();
    const a: string[] = [];
    const b: string[] = [];
    const c: string[] = [];
    const d: string[] = [];
    listen(listens, 'alice', 'docs', ['tools'], 'a-1', a);
    listen(listens, 'bob', 'docs', ['tools', 'prompts'], 'b-1', b);
    listen(listens, 'alice', 'docs', ['prompts'], 'c-1', c);
    listen(listens, 'alice', 'other', ['tools'], 'd-1', d);
    assert.equal(listens.tell('docs', ['tools']), 2);
    assert.deepEqual(a.map((m) => JSON.parse(m)), [{ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: { 'io.modelcontextprotocol/subscriptionId': 'a-1' } } }]);
    assert.equal(JSON.parse(b[0]!).params._meta['io.modelcontextprotocol/subscriptionId'], 'b-1');
    assert.deepEqual([c, d], [[], []]);
    assert.deepEqual(listens.endpoints().sort(), ['docs', 'other']);
  });

  test('a listen removed is told nothing more, and its endpoint is forgotten with its last listen', () => {
    const listens = new OpenListens();
    const heard: string[] = [];
    const forget = listen(listens, 'alice', 'docs', ['tools'], 'x', heard);
    forget();
    assert.equal(listens.tell('docs', ['tools']), 0);
    assert.deepEqual(heard, []);
    assert.deepEqual(listens.endpoints(), []);
    assert.equal(listens.size, 0);
  });

  test('listsAsked reads the filter\'s list members, true only', () => {
    assert.deepEqual([...listsAsked({ toolsListChanged: true, promptsListChanged: false, resourcesListChanged: true, resourceSubscriptions: ['x'] })], ['tools', 'resources']);
    assert.deepEqual([...listsAsked(undefined)], []);
  });
});

/** A backend's relayed events, released one at a time by the test. */
function gatedEvents(events: string[]): { source: AsyncIterable<Buffer>; release(): void } {
  const gates: Array<() => void> = [];
  let waiting: Promise<void> = new Promise((resolve) => gates.push(resolve));
  async function* source(): AsyncGenerator<Buffer> {
    for (const event of events) {
      await waiting;
      waiting = new Promise((resolve) => gates.push(resolve));
      yield Buffer.from(event);
    }
  }
  return { source: source(), release: () => gates.shift()?.() };
}

const ack = (id: string, notifications: object) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications, _meta: { 'io.modelcontextprotocol/subscriptionId': id } } });

describe('a relayed listen', () => {
  test('kept from the backend\'s acknowledgement (its filter and id), the notice written between whole events, forgotten at the end', async () => {
    const listens = new OpenListens();
    const relayed = new RelayedListen(listens, { userKey: 'alice', endpoint: 'docs', id: 7 });
    const backend = [ack('sub-7', { toolsListChanged: true }), JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: {} })];
    const gated = gatedEvents(backend.map((m) => formatSseEvent(m)));
    const out: string[] = [];
    const reading = (async () => {
      for await (const chunk of relayed.relay(gated.source, () => assert.fail('not ended by the gateway'))) out.push(chunk.toString('utf8'));
    })();
    assert.equal(listens.tell('docs', ['tools']), 0, 'not kept before the acknowledgement');
    relayed.observe(backend[0]!);
    gated.release();
    for (let i = 0; i < 50 && out.length < 1; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(listens.tell('docs', ['prompts']), 0, 'prompts were not acknowledged');
    assert.equal(listens.tell('docs', ['tools']), 1);
    for (let i = 0; i < 50 && out.length < 2; i++) await new Promise((resolve) => setImmediate(resolve));
    gated.release();
    gated.release();
    await reading;
    assert.equal(out.length, 3);
    assert.equal(out[0], formatSseEvent(backend[0]!));
    assert.deepEqual(JSON.parse(out[1]!.replace(/^data: /, '')), { jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub-7' } } });
    assert.equal(out[2], formatSseEvent(backend[1]!));
    assert.equal(listens.size, 0, 'forgotten when the stream ended');
  });
});

describe('ending listens (a reload removed their endpoint)', () => {
  test('endAll ends every listen of that endpoint, whoever opened it, and no other', () => {
    const listens = new OpenListens();
    const a: string[] = [];
    const b: string[] = [];
    const c: string[] = [];
    listen(listens, 'alice', 'gone', ['tools'], 'a-1', a);
    listen(listens, 'bob', 'gone', ['prompts'], 'b-1', b);
    listen(listens, 'alice', 'kept', ['tools'], 'c-1', c);
    assert.equal(listens.endAll('gone'), 2);
    assert.deepEqual([a, b, c], [['end'], ['end'], []]);
    assert.equal(listens.endAll('nowhere'), 0);
  });

  test('a relayed listen ended by the gateway sends its own result, tagged, then stops and closes the backend\'s answer', async () => {
    const listens = new OpenListens();
    const relayed = new RelayedListen(listens, { userKey: 'alice', endpoint: 'gone', id: 9 });
    // A second event the backend never gets to send: the listen is still open when the gateway ends it.
    const gated = gatedEvents([formatSseEvent(ack('sub-9', { toolsListChanged: true })), formatSseEvent('{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')]);
    let stopped = 0;
    const out: string[] = [];
    const reading = (async () => {
      for await (const chunk of relayed.relay(gated.source, () => stopped++)) out.push(chunk.toString('utf8'));
    })();
    relayed.observe(ack('sub-9', { toolsListChanged: true }));
    gated.release();
    for (let i = 0; i < 50 && out.length < 1; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(listens.endAll('gone'), 1);
    await reading;
    assert.equal(stopped, 1);
    assert.deepEqual(JSON.parse(out[1]!.replace(/^data: /, '')), { jsonrpc: '2.0', id: 9, result: { _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub-9' } } });
    assert.equal(listens.size, 0);
  });
});
