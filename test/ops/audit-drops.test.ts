/**
 * Audit records a sink loses are counted and logged (src/ops/audit-drops.ts; issue 44 part 1):
 * the file sink's failed writes — on `/dev/full`, where every write fails with ENOSPC as on a full
 * disk — batched, turn by turn and at the close; records after the close; the OTLP sink's failed
 * exports, to a collector that refuses them, and its full queue, to one that stalls; and through a
 * whole gateway, the counter on `/metrics` and one log line that names the error but no record.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Counter, Registry } from 'prom-client';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { auditDropReporter, DROP_LOG_INTERVAL_MS, linesIn, type AuditDropReason } from '../../src/ops/audit-drops.js';
import { createAudit, type AuditSink } from '../../src/ops/audit.js';
import { openAuditFile } from '../../src/ops/audit-file.js';
import { parseConfig } from '../../src/config/load.js';
import { createAuditLogSink } from '../../src/telemetry/audit-logs.js';
import { waitUntil } from '../helpers/child.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { captureLogLines } from '../helpers/log-lines.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { sessionClient } from '../helpers/session-client.js';

/** Every write to it fails with ENOSPC (Linux's full device). */
const FULL = '/dev/full';
const line = (n: number) => `{"schema":"switchboard.audit/v1","n":${n}}\n`;

type Drop = { reason: AuditDropReason; records: number; code?: string };
function recorder(): { drops: Drop[]; dropped: (reason: AuditDropReason, records: number, error?: unknown) => void } {
  const drops: Drop[] = [];
  return { drops, dropped: (reason, records, error) => drops.push({ reason, records, ...(error ? { code: (error as NodeJS.ErrnoException).code } : {}) }) };
}

const total = (drops: Drop[], reason: AuditDropReason) => drops.filter((d) => d.reason === reason).reduce((sum, d) => sum + d.records, 0);

describe('the file sink', () => {
  test('a batch whose write fails is told, with every record it held and the error', async () => {
    const { drops, dropped } = recorder();
    const sink = openAuditFile(FULL, 10, dropped);
    for (let n = 0; n < 3; n++) sink.write(line(n));
    await waitUntil(async () => (drops.length ? true : undefined), { what: 'the failed batch told', timeoutMs: 5_000, intervalMs: 10 });
    assert.deepEqual(drops, [{ reason: 'write_failed', records: 3, code: 'ENOSPC' }]);
    sink.end();
  });

  test('flushInterval 0: the records of a turn whose write fails are told', async () => {
    const { drops, dropped } = recorder();
    const sink = openAuditFile(FULL, 0, dropped);
    sink.write(line(1));
    sink.write(line(2));
    await nextTurn();
    await nextTurn();
    assert.deepEqual(drops, [{ reason: 'write_failed', records: 2, code: 'ENOSPC' }]);
    sink.end();
  });

  test('what is held when the sink closes, written and failing, is told; so is each record after the close', async () => {
    for (const interval of [1_000, 0]) {
      const { drops, dropped } = recorder();
      const sink = openAuditFile(FULL, interval, dropped);
      sink.write(line(1));
      sink.write(line(2));
      sink.end();
      assert.equal(sink.write(line(3)), false, `flushInterval ${interval}: refused after the close`);
      assert.equal(total(drops, 'write_failed'), 2, `flushInterval ${interval}: the two held records`);
      assert.equal(total(drops, 'closed'), 1, `flushInterval ${interval}: the late one`);
    }
  });

  test('a record the audit makes after its sink closed (a call answered during the shutdown) is told as closed', async () => {
    const { drops, dropped } = recorder();
    const config = parseConfig({
      publicUrl: 'https://mcp.example.com',
      auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
      backends: [{ name: 'alpha', url: 'http://127.0.0.1:9999/mcp' }],
      audit: { sink: 'file', path: FULL },
    });
    const sinks: string[] = [];
    const audit = createAudit(config, { dropped: (sink) => (sinks.push(sink), dropped) }, () => undefined)!;
    await audit.close();
    audit.record({ event: 'call', userKey: 'user-key', claims: {}, endpoint: '/mcp/alpha', backend: 'alpha', method: 'tools/call', tool: 'announce', arguments: {}, decision: 'allow', rule: 'policy.default', outcome: 'ok', durationMs: 1 });
    assert.deepEqual(sinks, ['file']);
    assert.deepEqual(drops, [{ reason: 'closed', records: 1 }]);
  });

  test('a record is counted once it is whole: a newline ends it', () => {
    const bytes = Buffer.from(line(1) + line(2) + '{"cut":');
    assert.equal(linesIn(bytes), 2);
    assert.equal(linesIn(bytes, line(1).length - 1), 2, 'from inside the first record: it is lost too');
    assert.equal(linesIn(bytes, line(1).length), 1);
    assert.equal(linesIn(bytes.subarray(bytes.length - 3)), 0);
  });
});

describe('the reporter', () => {
  function reporter() {
    const registry = new Registry();
    const counter = new Counter({ name: 'drops_total', help: 'h', labelNames: ['sink', 'reason'], registers: [registry] });
    const logged: Array<Record<string, unknown>> = [];
    let now = 1_000_000;
    const report = auditDropReporter(counter, { error: (fields, message) => logged.push({ ...fields, message }) }, () => now);
    const count = async (sink: string, reason: string) => (await counter.get()).values.find((v) => v.labels.sink === sink && v.labels.reason === reason)?.value ?? 0;
    return { report, logged, count, advance: (ms: number) => (now += ms) };
  }

  test('every record is counted; the first loss is logged at once, then one line a minute with what was lost since', async () => {
    const { report, logged, count, advance } = reporter();
    const file = report('file');
    const error = Object.assign(new Error('ENOSPC: no space left on device, write /var/log/audit.jsonl'), { code: 'ENOSPC' });
    file('write_failed', 3, error);
    advance(100);
    file('write_failed', 4, error);
    advance(100);
    file('write_failed', 5, error);
    assert.equal(await count('file', 'write_failed'), 12);
    assert.equal(logged.length, 1, 'one line for a burst');
    assert.deepEqual(logged[0], { sink: 'file', reason: 'write_failed', records: 3, error: 'ENOSPC', message: 'audit records lost' });
    advance(DROP_LOG_INTERVAL_MS);
    file('write_failed', 1, error);
    assert.equal(logged.length, 2);
    assert.equal(logged[1]!.records, 10, 'the 9 held back and this one');
    assert.equal(logged[1]!.sinceMs, DROP_LOG_INTERVAL_MS + 200);
    // Another sink or reason is its own first loss.
    report('otlp')('export_failed', 2, Object.assign(new Error('Bad Request at https://user:secret@collector.example/v1/logs'), { code: 400 }));
    file('closed', 1);
    assert.equal(logged.length, 4);
    assert.equal(logged[2]!.error, '400', 'the code, not the message');
    assert.equal(logged[3]!.error, undefined);
    assert.ok(!JSON.stringify(logged).includes('secret') && !JSON.stringify(logged).includes('/var/log'), 'no error message in the log');
    assert.equal(await count('otlp', 'export_failed'), 2);
  });

  test('an error without a code is named by its kind', () => {
    const { report, logged } = reporter();
    report('otlp')('export_failed', 1, new TypeError('fetch failed: https://token@collector.example'));
    assert.equal(logged[0]!.error, 'TypeError');
  });
});

/**
 * An OTLP collector on a free port for the tests of one `describe`, answering each export as
 * `answer` does once its body has arrived; the sink writing to it, records told to `dropped`.
 */
function collectorFor(answer: (body: Buffer, res: ServerResponse) => void): { sink: (dropped: (reason: AuditDropReason, records: number, error?: unknown) => void) => AuditSink } {
  let server: Server;
  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => answer(Buffer.concat(chunks), res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    sink: (dropped) => createAuditLogSink(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, {}, resourceFromAttributes({ 'service.name': 'audit-drops-test' }), '0.0.0', dropped),
  };
}

const auditRecord = (n: number) => ({ schema: 'switchboard.audit/v1', time: new Date().toISOString(), n });

describe('the OTLP sink', () => {
  let refused = 0;
  const collector = collectorFor((_body, res) => {
    refused++;
    res.writeHead(400, { 'content-type': 'application/json' }).end('{"message":"refused"}');
  });

  test('the records of an export the collector refuses are told', async () => {
    const { drops, dropped } = recorder();
    const sink = collector.sink(dropped);
    for (let n = 0; n < 4; n++) sink.writeRecord!(auditRecord(n));
    await new Promise<void>((resolve) => sink.end!(resolve));
    assert.ok(refused >= 1, 'the collector was asked');
    assert.equal(total(drops, 'export_failed'), 4);
  });
});

describe('the OTLP sink, its collector stalled', () => {
  let stalled = true;
  const held: Array<() => void> = [];
  let exported = 0;
  const collector = collectorFor((body, res) => {
    const answer = () => {
      const request = JSON.parse(body.toString('utf8')) as { resourceLogs: Array<{ scopeLogs: Array<{ logRecords: unknown[] }> }> };
      for (const r of request.resourceLogs) for (const s of r.scopeLogs) exported += s.logRecords.length;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    };
    if (stalled) held.push(answer);
    else answer();
  });

  test('records beyond the queue are refused and told as queue_full; every other one is exported; one after the close is told as closed', async () => {
    const { drops, dropped } = recorder();
    const sink = collector.sink(dropped);
    const written = 3000;
    for (let n = 0; n < written; n++) sink.writeRecord!(auditRecord(n));
    const full = total(drops, 'queue_full');
    // 2,048 wait in the queue; at most one batch of 512 more may have left for the stalled collector meanwhile.
    assert.ok(full >= written - 2048 - 512 && full <= written - 2048, `queue_full ${full}`);
    await waitUntil(async () => (held.length ? true : undefined), { what: 'an export reaching the stalled collector', timeoutMs: 5_000, intervalMs: 10 });
    stalled = false;
    for (const answer of held.splice(0)) answer();
    await waitUntil(async () => (exported === written - full ? true : undefined), { what: `${written - full} records exported`, timeoutMs: 10_000, intervalMs: 20 });
    // The queue has room again once its records left.
    for (let n = 0; n < 100; n++) sink.writeRecord!(auditRecord(written + n));
    await new Promise<void>((resolve) => sink.end!(resolve));
    assert.equal(total(drops, 'queue_full'), full, 'none refused once the collector answers');
    assert.equal(exported, written - full + 100, 'every record not refused was exported');
    assert.equal(total(drops, 'export_failed'), 0);
    sink.writeRecord!(auditRecord(-1));
    assert.equal(total(drops, 'closed'), 1);
  });
});

describe('through the gateway', () => {
  let oauth: OAuthHandle;
  let backend: FixtureChild;
  let gateway: GatewayHandle;
  const { stream: logStream, lines } = captureLogLines();

  before(async () => {
    [oauth, backend] = await Promise.all([startOAuthServer(), startFixtureChild('announcing-backend.ts')]);
    gateway = await startGateway({
      issuer: oauth.issuer,
      backends: [{ name: 'alpha', url: backend.url }],
      overrides: { log: { level: 'info' }, audit: { sink: 'file', path: FULL, flushInterval: '10ms', arguments: { include: true } } },
      logStream,
    });
  });
  after(async () => {
    await gateway?.close();
    await Promise.allSettled([backend?.child.stop(), oauth?.stop()]);
  });

  test('a call whose record cannot be written is answered; the loss is on /metrics and in the log, the record is not', async () => {
    const token = await oauth.token({ sub: 'audited-user', aud: gateway.audience });
    const client = sessionClient(() => gateway.endpoint('alpha'), 'audit-drops-test');
    const sessionId = await client.initialize(token);
    const res = await client.post(token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'announce', arguments: { text: 'sensitive-argument' } } }, sessionId);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /announced sensitive-argument/);
    const metric = /^switchboard_audit_records_dropped_total\{sink="file",reason="write_failed"\} (\d+)$/m;
    const scrape = async () => metric.exec(await (await fetch(`${gateway.url}/metrics`)).text())?.[1];
    await waitUntil(async () => ((await scrape()) === '1' ? true : undefined), { what: 'the lost record counted', timeoutMs: 5_000, intervalMs: 20 });
    const lost = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'audit records lost');
    assert.equal(lost.length, 1);
    assert.equal(lost[0]!.level, 50, 'error level');
    assert.equal(lost[0]!.error, 'ENOSPC');
    assert.ok(!lines.some((l) => l.includes('sensitive-argument') && l.includes('audit')), 'no record in the log');
  });
});
