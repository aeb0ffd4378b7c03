/**
 * src/ops/audit-line.ts: an audit line written into a batch, its repeating members kept as bytes
 * (src/ops/kept-encodings.ts), is `JSON.stringify` of the record — checked here where the writer
 * does something of its own: the time written from a per-second prefix and the milliseconds'
 * digits, the duration's digits, and kept values that alternate, overflow the share kept per
 * member, or need escaping. (test/policy/cel-rules.test.ts compares whole records of every kind.)
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { auditSchema } from '../../src/config/policy-schema.js';
import { Audit, type AuditRequest, type AuditVerdict } from '../../src/ops/audit.js';
import { AuditLineWriter } from '../../src/ops/audit-line.js';
import { canonicalJson } from '../../src/ops/canonical-json.js';
import { Utf8BatchWriter } from '../../src/ops/utf8-batch-writer.js';

const request: AuditRequest = { userKey: 'U'.repeat(32), claims: {}, backend: 'bank', method: 'tools/call', requestId: 1, tool: 'transfer' };
const verdict: AuditVerdict = { event: 'call', decision: 'allow', rule: 'r', outcome: 'ok', durationMs: 1 };
const extras = { user: 'U'.repeat(16), claims: '{}', tenant: undefined };

/** The lines `write` makes, parsed. */
function lines(w: Utf8BatchWriter): Array<Record<string, unknown>> {
  return w.view().toString('utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
}

test("the time is toISOString()'s at every millisecond pattern: padding, second and day boundaries, out of order", () => {
  const writer = new AuditLineWriter('switchboard.audit/v1');
  const midnight = Date.UTC(2026, 10, 30);
  const times = [0, 1, 999, 1000, Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(9999, 11, 31, 23, 59, 59, 999)];
  for (let ms = midnight - 1100; ms < midnight + 1100; ms += 7) times.push(ms);
  times.push(midnight + 5000, midnight - 5000, midnight + 5001);
  const w = new Utf8BatchWriter(Buffer.alloc(64));
  for (const ms of times) writer.write(w, ms, request, verdict, extras);
  assert.deepEqual(lines(w).map((l) => l.time), times.map((ms) => new Date(ms).toISOString()));
});

test('the duration is JSON.stringify of it rounded to the microsecond, for every kind of number', () => {
  const writer = new AuditLineWriter('switchboard.audit/v1');
  const durations = [0, -0, 0.0004, 0.0005, 0.001, 0.01, 0.1, 0.12, 0.123, 1.2345, 1.2355, 10, 999.9995, 1234.5, 86_400_000.001, 999_999_999.999, 1e9, 1e12, 2 ** 53, -1, -0.0004, NaN, Infinity, 1e-7, 5e-324];
  let seed = 11;
  for (let i = 0; i < 2000; i++) {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    durations.push((seed % 10_000_000) / 7919, seed / 1000, (seed % 1000) / 1000);
  }
  const w = new Utf8BatchWriter(Buffer.alloc(64));
  for (const durationMs of durations) writer.write(w, 0, request, { ...verdict, durationMs }, extras);
  const text = w.view().toString('utf8').split('\n').filter(Boolean);
  const written = text.map((line) => /,"durationMs":([^,}]*)[,}]/.exec(line)?.[1]);
  assert.deepEqual(written, durations.map((ms) => JSON.stringify(Math.round(ms * 1000) / 1000)));
});

test('kept members: values that alternate, more than a member keeps, and ones JSON escapes, line for line as JSON.stringify of the record', () => {
  const settings = auditSchema.parse({ claims: ['email'] });
  const batch = new Utf8BatchWriter(Buffer.alloc(64));
  const records: Array<Record<string, unknown>> = [];
  const asBatch = new Audit({ write: () => assert.fail('a batch sink is not given strings'), batch: () => batch, added: () => {} }, settings);
  const asRecords = new Audit({ write: () => true, writeRecord: (r) => records.push(r) }, settings);
  const odd = ['a"b', 'back\\slash', 'line\u2028sep', 'ü', '\u0007', 'x'.repeat(300), '\ud800'];
  for (let i = 0; i < 300; i++) {
    const backend = i % 3 === 0 ? `backend-${i % 150}` : odd[i % odd.length]!;
    const event: AuditRequest & AuditVerdict = {
      ...request,
      ...verdict,
      userKey: `user-${i % 2}-${'k'.repeat(30)}`,
      claims: { email: `u${i % 5}@example.com` },
      session: i % 4 ? `session-${i % 97}` : undefined,
      backend,
      tool: odd[(i + 3) % odd.length],
      requestId: i % 5 === 0 ? `id-${i}` : i % 5 === 1 ? null : i,
      rule: i % 2 ? 'allow-rest' : 'policy.default',
      outcome: i % 7 ? 'ok' : 'isError',
      code: i % 7 ? undefined : -32603,
      durationMs: i / 3,
      traceId: i % 2 ? 'ab'.repeat(16) : undefined,
    };
    asBatch.record(event);
    asRecords.record(event);
  }
  const written = batch.view().toString('utf8').split('\n').filter(Boolean);
  assert.equal(written.length, records.length);
  const withoutTime = (text: string) => text.replace(/"time":"[^"]+"/, '"time":""');
  written.forEach((line, i) => assert.equal(withoutTime(line), withoutTime(JSON.stringify(records[i])), `record ${i}`));
});

test('argumentsSha256 is the SHA-256 of the canonical JSON, for arguments in order, out of order, large, and after a large one', () => {
  const records: Array<Record<string, unknown>> = [];
  const audit = new Audit({ write: () => true, writeRecord: (r) => records.push(r) }, auditSchema.parse({ arguments: { include: true, maxBytes: 100 } }));
  const args: unknown[] = [
    { message: 'hello, switchboard' },
    { b: 1, a: { d: [true, null], c: 'é😀' } },
    JSON.parse('{"10":1,"9":2}'),
    { text: 'x'.repeat(200_000) },
    { amount: -0, note: 'after a large one' },
  ];
  for (const a of args) audit.record({ ...request, ...verdict, arguments: a });
  records.forEach((r, i) => {
    const canonical = canonicalJson(args[i]);
    assert.equal(r.argumentsSha256, createHash('sha256').update(canonical).digest('hex'), `arguments ${i}`);
    assert.equal(r.argumentsTruncated, Buffer.byteLength(canonical) > 100 ? true : undefined, `arguments ${i}`);
  });
});
