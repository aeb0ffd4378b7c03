/**
 * A span's attributes written by runs kept as bytes (src/telemetry/kept-runs.ts, issue 44 part 1)
 * read back exactly as the same attributes written one `KeyValue` at a time: whatever the order
 * in which sessions, users and tools come back, past the share of sets a run keeps, with empty
 * runs, a value that changes in one slot only, and a value that is not kept (an array changed in
 * place).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Utf8BatchWriter } from '../../src/ops/utf8-batch-writer.js';
import { KeptRun } from '../../src/ops/kept-runs.js';
import { keyValues, writeSpanAttributes } from '../../src/telemetry/otlp-json-values.js';
import { SpanAttributes } from '../../src/telemetry/span-attributes.js';

/** The attributes as writeSpanAttributes writes them, as text. */
function written(attributes: SpanAttributes): string {
  const w = new Utf8BatchWriter(Buffer.alloc(256));
  writeSpanAttributes(attributes.values, w);
  return w.view().toString('utf8');
}

/** A call's SERVER span attributes: `user`, `session` and `tool` pick which of each. */
function serverAttributes(user: number, session: number, tool: number, id: number): SpanAttributes {
  return SpanAttributes.of({
    'mcp.method.name': 'tools/call',
    'gen_ai.tool.name': `tool-${tool}`,
    'gen_ai.operation.name': 'execute_tool',
    'jsonrpc.request.id': String(id),
    'mcp.session.id': `session-${session}`,
    'mcp.protocol.version': '2025-11-25',
    'client.address': '127.0.0.1',
    'client.port': 40_000 + (id % 7),
    'network.transport': 'tcp',
    'switchboard.backend': 'crm',
    'enduser.pseudo.id': `user-${user}`,
  });
}

test('runs kept as bytes read back as the attributes written one by one, users, sessions and tools interleaved past the share kept', () => {
  // 12 users × 3 sessions × 4 tools in a shuffled but fixed order, twice: more sets than a run keeps (8).
  const order: Array<[number, number, number]> = [];
  for (let user = 0; user < 12; user++) for (let session = 0; session < 3; session++) for (let tool = 0; tool < 4; tool++) order.push([user, session, tool]);
  for (let i = order.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  let id = 0;
  for (let round = 0; round < 2; round++) {
    for (const [user, session, tool] of order) {
      const attributes = serverAttributes(user, session, tool, id++);
      assert.equal(written(attributes), keyValues(attributes.toObject()), `user ${user}, session ${session}, tool ${tool}`);
    }
  }
});

test('a run whose values differ in one slot only is not reused: the user of each span is its own', () => {
  for (let i = 0; i < 20; i++) {
    const user = i % 2 === 0 ? 'alice' : 'bob';
    const attributes = serverAttributes(0, 0, 0, i).set('enduser.pseudo.id', user);
    const read = JSON.parse(written(attributes)) as Array<{ key: string; value: { stringValue?: string } }>;
    assert.equal(read.find((kv) => kv.key === 'enduser.pseudo.id')?.value.stringValue, user);
  }
});

test('empty runs add no comma; the volatile slots between runs are written as they come', () => {
  const only = (key: Parameters<SpanAttributes['set']>[0], value: string | number) => new SpanAttributes().set(key, value);
  assert.equal(written(new SpanAttributes()), '[]');
  for (const attributes of [only('jsonrpc.request.id', '7'), only('client.port', 8080), only('switchboard.backend', 'crm'), only('error.type', 'tool_error'), only('mcp.method.name', 'ping')]) {
    for (let i = 0; i < 3; i++) assert.equal(written(attributes), keyValues(attributes.toObject()));
  }
  const both = only('mcp.method.name', 'ping').set('rpc.response.status_code', '-32601');
  assert.equal(written(both), keyValues(both.toObject()));
});

test('a run holding a value other than a string, number or boolean is written afresh each time', () => {
  const list = ['a', 'b'];
  const run = new KeptRun(0, 2, (slot, value, w) => w.write(JSON.stringify([slot, value])));
  const write = (values: unknown[]) => {
    const w = new Utf8BatchWriter(Buffer.alloc(64));
    assert.equal(run.write(values, true, w), false);
    return w.view().toString('utf8');
  };
  assert.equal(write(['x', list]), '[0,"x"],[1,["a","b"]]');
  list.push('c');
  assert.equal(write(['x', list]), '[0,"x"],[1,["a","b","c"]]', 'the array as it is now, not as first written');
  assert.equal(write(['x', 1]), '[0,"x"],[1,1]');
  assert.equal(write(['x', 1]), '[0,"x"],[1,1]');
  const w = new Utf8BatchWriter(Buffer.alloc(64));
  assert.equal(run.write([undefined, undefined], true, w), true, 'an empty run leaves the list empty');
  assert.equal(run.write([undefined, undefined], true, w), true, 'and so does its kept (empty) entry');
  assert.equal(w.length, 0);
});
