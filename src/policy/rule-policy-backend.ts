/**
 * `policy.rules` and the audit trail as a face of the backend (issue 30 §2–§3), like the tool
 * lists (tool-policy-backend.ts), around which it is put: every path that calls a backend —
 * `/mcp/{backend}`, the members of `/mcp`, the 2026-07-28 stateless path and the bridges
 * between the eras, WebSocket through HTTP — is judged and recorded by the same code.
 *
 * - Each request but `initialize`, `ping` and `server/discover` (the gateway's own handshakes)
 *   is judged by the rules (cel-rules.ts) with its arguments. A denied request never reaches
 *   the backend: a `tools/call` of a tool no call could use is answered as an unknown tool
 *   (-32602, as the lists answer, leaking nothing), any other denial with -32015 "Access denied
 *   by policy" (the rule's name goes to the audit record, not to the client). In a batch
 *   (2025-03-26) the rest is forwarded and the errors added (answer-edit.ts).
 * - `tools/list` results keep the tools some call of which could be allowed.
 * - With the audit on, each `tools/call`, `prompts/get`, `resources/read` and
 *   `resources/subscribe` gets one record when its answer passes (outcome, duration), and every
 *   refusal — a rule's or a tool list's — one at once.
 *
 * Put in front of a backend only when there are rules or an audit: otherwise it costs nothing.
 */
import type { BackendCallHeaders, BackendCaller, BackendResponse, McpBackend } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import { DecoratedBackend } from '../backends/decorated-backend.js';
import type { Config } from '../config/schema.js';
import type { Audit, AuditEvent, AuditSinks } from '../ops/audit.js';
import { LiveAudit } from '../ops/live-audit.js';
import type { Metrics } from '../ops/metrics.js';
import { ErrorCode, errorResponse, isBatchText, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { editAnswer, idKey, toolNameOf } from './answer-edit.js';
import { AUDITED_METHODS, callerBase, outcomeOf, requestFacts } from './audit-calls.js';
import { derived } from '../config/live-config.js';
import { CelRules, type RuleDecision } from './cel-rules.js';
import { claimValues } from './backend-access.js';
import { policyVariables, type RequestFacts } from './policy-input.js';
import { toolListEntry } from './tool-policy.js';
import { messagesOf } from './tool-policy-backend.js';

const UNJUDGED: ReadonlySet<string> = new Set(['initialize', 'ping', 'server/discover']);

type Request = JsonRpcMessage & { id: JsonRpcId; method: string };
type Pending = { base: ReturnType<typeof callerBase>; rule: string };

export interface RulePolicyParts {
  /** The rules of the config as it is now: compiled again after a reload changed it (config/live-config.ts). */
  rules: () => CelRules;
  /** The audit as the config has it now (ops/live-audit.ts); undefined while off. */
  audit: () => Audit | undefined;
  metrics: Metrics;
}

export class RulePolicyBackend extends DecoratedBackend {
  constructor(
    inner: McpBackend,
    private readonly parts: RulePolicyParts,
  ) {
    super(inner);
  }

  async post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const caller = headers.caller;
    // No rules and no audit (the default): passed on untouched, before any parsing — this face is on every backend so that a reload can turn either on.
    if (!caller || (!this.parts.rules().size && !this.parts.audit())) return this.inner.post(body, headers, signal);
    const messages = messagesOf(body);
    if (!messages) return this.inner.post(body, headers, signal);
    const started = performance.now();
    const errors: JsonRpcMessage[] = [];
    const denied = new Set<JsonRpcMessage>();
    const pending = new Map<string, Pending>();
    const listIds = new Set<string>();
    for (const m of messages) {
      if (!isRequest(m) || UNJUDGED.has(m.method!)) continue;
      const facts = requestFacts(m, this.name);
      const rules = this.parts.rules();
      const decision = rules.size ? rules.decide(policyVariables(caller, facts)) : undefined;
      if (decision?.effect === 'deny') {
        denied.add(m);
        errors.push(this.#refuse(caller, m as Request, facts, decision, started));
      } else {
        if (m.method === 'tools/list' && this.parts.rules().size) listIds.add(idKey(m.id!));
        if (this.parts.audit() && AUDITED_METHODS.has(m.method!)) this.#pend(pending, caller, m as Request, facts, decision, started);
      }
    }
    const rest = messages.filter((m) => !denied.has(m));
    if (!rest.length || (denied.size && !isBatchText(body))) {
      const refusal = isBatchText(body) ? errors : errors[0]!;
      return { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(JSON.stringify(refusal)), refused: true };
    }
    const forward = denied.size ? JSON.stringify(rest.length === 1 ? rest[0] : rest) : body;
    const res = await this.inner.post(forward, headers, signal);
    if (res.status < 200 || res.status >= 300) this.#settle(pending, started, { outcome: 'error' });
    const visible = (tool: unknown) => this.#listable(caller, toolNameOf(tool));
    const observe = pending.size ? (msg: JsonRpcMessage) => this.#observed(pending, started, msg) : undefined;
    return editAnswer(res, { errors, listIds, visible, observe });
  }

  /** The denial's answer; its record and count. */
  #refuse(caller: BackendCaller, m: Request, facts: RequestFacts, decision: RuleDecision, started: number): JsonRpcMessage {
    this.parts.metrics.policyDenials.inc({ backend: this.name, reason: 'rule' });
    caller.log.info({ backend: this.name, method: m.method, rule: decision.rule }, 'request refused by policy rule');
    const hidden = m.method === 'tools/call' && !this.#listable(caller, facts.tool ?? '');
    const answer = hidden ? errorResponse(m.id, ErrorCode.InvalidParams, `Unknown tool: ${facts.tool}`) : errorResponse(m.id, ErrorCode.AccessDenied, 'Access denied by policy');
    this.parts.audit()?.record({ ...callerBase(caller, facts, m), event: 'refusal', decision: 'deny', rule: decision.rule, outcome: 'error', code: answer.error!.code, durationMs: performance.now() - started });
    return answer;
  }

  /** An allowed request to record when its answer passes — or now, when the tool lists refuse it. */
  #pend(pending: Map<string, Pending>, caller: BackendCaller, m: Request, facts: RequestFacts, decision: RuleDecision | undefined, started: number): void {
    const base = callerBase(caller, facts, m);
    const entry = m.method === 'tools/call' ? toolListEntry(this.config, facts.tool ?? '') : undefined;
    if (entry && !entry.allowed) {
      this.parts.audit()?.record({ ...base, event: 'refusal', decision: 'deny', rule: entry.rule, outcome: 'error', code: ErrorCode.InvalidParams, durationMs: performance.now() - started });
      return;
    }
    const rule = decision && decision.rule !== 'policy.default' ? decision.rule : (entry?.rule ?? 'policy.default');
    pending.set(idKey(m.id), { base, rule });
  }

  #observed(pending: Map<string, Pending>, started: number, msg: JsonRpcMessage): void {
    if (msg.method !== undefined || (typeof msg.id !== 'string' && typeof msg.id !== 'number')) return;
    const key = idKey(msg.id);
    const p = pending.get(key);
    if (!p) return;
    pending.delete(key);
    this.#write(p, started, outcomeOf(msg));
  }

  #settle(pending: Map<string, Pending>, started: number, outcome: Pick<AuditEvent, 'outcome' | 'code'>): void {
    for (const p of pending.values()) this.#write(p, started, outcome);
    pending.clear();
  }

  #write(p: Pending, started: number, outcome: Pick<AuditEvent, 'outcome' | 'code'>): void {
    this.parts.audit()?.record({ ...p.base, event: 'call', decision: 'allow', rule: p.rule, ...outcome, durationMs: performance.now() - started });
  }

  /** Whether a tools/list shows the tool: some call of it could be allowed (cel-rules.ts). */
  #listable(caller: BackendCaller, tool: string): boolean {
    const rules = this.parts.rules();
    if (!rules.size) return true;
    return rules.couldAllow(policyVariables(caller, { method: 'tools/call', backend: this.name, tool }, false));
  }
}

/**
 * The live audit (ops/live-audit.ts: reopened when a reload changes `audit`) and the face that
 * puts the rules and the audit in front of a backend (backend-set.ts applies it to every
 * backend, at start and to those a reload adds). The face is always there, so a reload can turn
 * on the first rule or the audit; with neither it passes each request on before parsing it
 * (bench/policy-cost.ts "off"). The rules follow the live config.
 */
export function rulePolicyFace(config: Config, metrics: Metrics, sinks: AuditSinks = {}): { audit: LiveAudit; face: (backend: McpBackend) => McpBackend } {
  const tenantClaim = config.auth.tenantClaim;
  const audit = new LiveAudit(config, sinks, (claims) => (tenantClaim ? claimValues(claims, tenantClaim)[0] : undefined));
  const rules = derived(config, (c) => new CelRules(c.policy));
  return { audit, face: (backend) => new RulePolicyBackend(backend, { rules, audit: () => audit.current, metrics }) };
}
