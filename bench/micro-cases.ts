/**
 * The cases bench/micro-count.ts counts: what governance does to every call, one function each,
 * on the inputs of the governance phase (bench/governance.ts: the `echo` call of bench/load.ts
 * answered by bench/fast-backend.ts's chunked JSON, as a v2 SDK server writes it).
 *
 * Run by micro-count.ts as a bundle: `node micro.mjs <case> <calls> [--time]` warms the case
 * up (the same number of calls every time), then makes `calls` more; with `--time` it prints
 * ns a call of those. Imported (for the names), it runs nothing.
 */
import { SpanKind, TraceFlags } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { auditSchema, policySchema } from '../src/config/policy-schema.js';
import { GOVERNANCE_RULES } from './governance-rules.js';
import { Audit, type AuditRequest, type AuditVerdict } from '../src/ops/audit.js';
import { Utf8BatchWriter } from '../src/ops/utf8-batch-writer.js';
import { requestFacts } from '../src/policy/audit-calls.js';
import { CelRules } from '../src/policy/cel-rules.js';
import { bytesMayHoldError, scanResponse } from '../src/policy/outcome-scan.js';
import { policyVariables } from '../src/policy/policy-input.js';
import type { BackendCaller } from '../src/backends/backend.js';
import { DurationHistogram } from '../src/telemetry/duration-histogram.js';
import { METRIC_KEYS, METRIC_SLOTS } from '../src/telemetry/mcp-attributes.js';
import { withTraceMetaText } from '../src/telemetry/meta-splice.js';
import { writeSpan } from '../src/telemetry/otlp-json-spans.js';
import { RecordedSpan, type SpanSource } from '../src/telemetry/recorded-span.js';
import { RootSampling } from '../src/telemetry/root-sampling.js';
import { SLOT, SpanAttributes } from '../src/telemetry/span-attributes.js';
import { jsonShapeProblem, topParamsName } from '../src/wire/json-guard.js';
import type { JsonRpcMessage } from '../src/wire/jsonrpc.js';

const WARM_CALLS = 30_000;
/** Inputs differ call to call as a gateway's do (ids), from a fixed set so none is made in the loop. */
const VARIANTS = 64;

/** The answer of the phase's backend to call `id` (fast-backend.ts answerShaped, `chunked`). */
function benchAnswer(id: number): Buffer {
  const meta = { 'io.modelcontextprotocol/serverInfo': { name: 'bench-fast-backend', version: '1.0.0' } };
  const content = { content: [{ type: 'text', text: JSON.stringify({ message: 'hello, switchboard' }) }] };
  return Buffer.from(JSON.stringify({ result: { ...content, resultType: 'complete', _meta: meta }, jsonrpc: '2.0', id }));
}

/** Lowercase hex of `n` random digits (a trace or span id). */
function hexId(n: number): string {
  let id = '';
  for (let i = 0; i < n; i++) id += '0123456789abcdef'[Math.floor(Math.random() * 16)];
  return id;
}

/** A call's SERVER and CLIENT spans as otel-sdk.ts makes them (sampled, user as its pseudonym). */
function callSpans(i: number): [RecordedSpan, RecordedSpan] {
  const source: SpanSource = { resource: resourceFromAttributes({ 'service.name': 'switchboard' }), instrumentationScope: { name: 'switchboard', version: '1.0.0' } };
  const traceId = hexId(32);
  const started = 1000 + i;
  const tool = { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo', 'gen_ai.operation.name': 'execute_tool', 'jsonrpc.request.id': String(i) };
  const server = new RecordedSpan(source, 'tools/call echo', SpanKind.SERVER, { traceId, spanId: hexId(16), traceFlags: TraceFlags.SAMPLED }, undefined, SpanAttributes.of({
    ...tool,
    'mcp.session.id': 'a8f3c2e1-7b4d-4e5f-9a1b-2c3d4e5f6a7b',
    'mcp.protocol.version': '2025-11-25',
    'client.address': '127.0.0.1',
    'network.transport': 'tcp',
    'network.protocol.name': 'http',
    'network.protocol.version': '1.1',
    'switchboard.backend': 'gov-chunked',
    'client.port': 40000 + i,
    'enduser.pseudo.id': 'Qm9vLWJhci1iYXotcXV4LXF1dXgtY29y',
  }), undefined, started);
  server.ended(started + 1.25);
  const client = new RecordedSpan(source, 'tools/call echo', SpanKind.CLIENT, { traceId, spanId: hexId(16), traceFlags: TraceFlags.SAMPLED }, server.spanContext(), SpanAttributes.of({
    ...tool,
    'mcp.session.id': 'b8f3c2e1-7b4d-4e5f-9a1b-2c3d4e5f6a7b',
    'mcp.protocol.version': '2025-11-25',
    'server.address': '127.0.0.1',
    'server.port': 9100,
    'network.transport': 'tcp',
    'network.protocol.name': 'http',
    'switchboard.backend': 'gov-chunked',
  }), undefined, started + 0.2);
  client.ended(started + 1.05);
  return [server, client];
}

/** A call's audit record (policy/audit-calls.ts callerBase and the verdict rule-policy-backend.ts writes). */
function auditParts(i: number): [AuditRequest, AuditVerdict] {
  const request: AuditRequest = {
    userKey: 'Qm9vLWJhci1iYXotcXV4LXF1dXgtY29y',
    claims: { sub: 'bench-user', groups: ['bench'] },
    session: 'a8f3c2e1-7b4d-4e5f-9a1b-2c3d4e5f6a7b',
    endpoint: '/mcp/gov-chunked',
    backend: 'gov-chunked',
    method: 'tools/call',
    requestId: i,
    tool: 'echo',
    arguments: { message: 'hello, switchboard' },
    traceId: hexId(32),
  };
  return [request, { event: 'call', decision: 'allow', rule: 'allow-rest', outcome: 'ok', durationMs: 1.234 }];
}

/** Each case: made once, then called; what it returns is summed so no call is left out. */
export const MICRO_CASES: Record<string, () => (i: number) => number> = {
  /** policy/outcome-scan.ts on the phase's answer: what every observed answer costs. */
  scan: () => {
    const answers = Array.from({ length: VARIANTS }, (_, i) => benchAnswer(1000 + i));
    return (i) => scanResponse(answers[i % VARIANTS]!)!.id as number;
  },
  /**
   * What an observer that acts only on errors pays instead of the scan (policy/answer-observe.ts:
   * the CLIENT spans of metrics only): the look for `rror"` and `\u` in the same answer.
   */
  'error-check': () => {
    const answers = Array.from({ length: VARIANTS }, (_, i) => benchAnswer(1000 + i));
    return (i) => (bytesMayHoldError(answers[i % VARIANTS]!) ? 1 : 0);
  },
  /**
   * A root's sampling decision at governed 0.1's ratio (telemetry/root-sampling.ts): nine in ten
   * refused, the tenth with its trace id written.
   */
  'root-sampling': () => {
    const roots = new RootSampling(0.1);
    return () => roots.admit()?.length ?? 1;
  },
  /** The CLIENT span's context spliced into the phase's request (telemetry/meta-splice.ts). */
  'meta-splice': () => {
    const requests = Array.from({ length: VARIANTS }, (_, i) => {
      const text = `{"jsonrpc":"2.0","id":${i},"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, switchboard"}}}`;
      // Where the route's scan saw `params` (mcp/routes.ts hands it on with the parse).
      jsonShapeProblem(text);
      return { text, message: JSON.parse(text) as JsonRpcMessage, paramsName: topParamsName() };
    });
    const trace = { traceparent: `00-${hexId(32)}-${hexId(16)}-01` };
    return (i) => {
      const request = requests[i % VARIANTS]!;
      return withTraceMetaText(request.text, request.message, trace, request.paramsName).length;
    };
  },
  /** A call's two spans written into an export request (otlp-json-spans.ts writeSpan). */
  spans: () => {
    const spans = Array.from({ length: VARIANTS }, (_, i) => callSpans(i));
    const w = new Utf8BatchWriter(Buffer.allocUnsafe(1 << 20));
    return (i) => {
      if (i % 256 === 0) w.truncate(0);
      const [server, client] = spans[i % VARIANTS]!;
      // Each call's own request id, as the gateway's spans carry: a new string every time.
      server.own.values[SLOT['jsonrpc.request.id']] = client.own.values[SLOT['jsonrpc.request.id']] = String(i);
      writeSpan(server, w);
      writeSpan(client, w);
      return w.length;
    };
  },
  /** A call's two duration records (SERVER and CLIENT histograms, telemetry/duration-histogram.ts): what metrics only adds to every call. */
  histograms: () => {
    const spans = Array.from({ length: VARIANTS }, (_, i) => callSpans(i));
    const histogram = () => new DurationHistogram({ name: 'h', description: '', keys: METRIC_KEYS, slots: METRIC_SLOTS, boundaries: [0.01, 0.1, 1] });
    const server = histogram();
    const client = histogram();
    return (i) => {
      const [s, c] = spans[i % VARIANTS]!;
      server.record(0.001, s.own.values);
      client.record(0.001, c.own.values);
      return 1;
    };
  },
  /**
   * The phase's three CEL rules (bench/governance-rules.ts) deciding a call as
   * policy/rule-policy-backend.ts `#judged` does: the request's facts, its variables, the decision.
   */
  rules: () => {
    const rules = new CelRules(policySchema.parse({ rules: GOVERNANCE_RULES }));
    const caller = { principal: { userKey: 'Qm9vLWJhci1iYXotcXV4LXF1dXgtY29y', claims: { sub: 'bench-user', groups: ['bench'] } }, address: '127.0.0.1', headers: {} } as unknown as BackendCaller;
    const messages = Array.from({ length: VARIANTS }, (_, i) => JSON.parse(`{"jsonrpc":"2.0","id":${i},"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, switchboard"}}}`) as JsonRpcMessage);
    return (i) => {
      const facts = requestFacts(messages[i % VARIANTS]!, 'gov-chunked');
      return rules.decide(policyVariables(caller, facts, undefined, rules.readsRequest)).effect.length;
    };
  },
  /** A call's audit line written into the file sink's batch (ops/audit.ts recordOf), argument hash included. */
  'audit-line': () => {
    const settings = auditSchema.parse({});
    const w = new Utf8BatchWriter(Buffer.allocUnsafe(1 << 20));
    const audit = new Audit({ write: () => true, batch: () => w, added: () => {} }, settings);
    const records = Array.from({ length: VARIANTS }, (_, i) => auditParts(i));
    return (i) => {
      if (i % 256 === 0) w.truncate(0);
      const [request, verdict] = records[i % VARIANTS]!;
      audit.recordOf(request, verdict);
      return w.length;
    };
  },
};

function main(name: string, calls: number): void {
  const run = MICRO_CASES[name]!();
  let sink = 0;
  for (let i = 0; i < WARM_CALLS; i++) sink += run(i);
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) sink += run(i);
  const ns = Number(process.hrtime.bigint() - start) / calls;
  if (process.argv.includes('--time')) console.log(`${ns.toFixed(0)} ns a call`);
  if (sink === -1) console.log('');
}

if (process.argv[1]?.endsWith('micro.mjs')) main(process.argv[2]!, Number(process.argv[3]));
