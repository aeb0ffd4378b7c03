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
 * - List results keep the entries some request for which could be allowed: `tools/list` the
 *   tools some call could use, `prompts/list` the prompts some `prompts/get` could, `resources/list`
 *   the resources whose `resources/read` is allowed, `resources/templates/list` the templates some
 *   read could use, its URI unknown (cel-rules.ts). A request for a hidden entry is answered as
 *   for one that does not exist: -32602 unknown tool or prompt, -32002 resource not found (MCP
 *   2025-11-25 Resources, "Error Handling").
 * - With the audit on, each `tools/call`, `prompts/get`, `resources/read` and
 *   `resources/subscribe` gets one record when its answer passes (outcome, duration), and every
 *   refusal — a rule's or a tool list's — one at once. A request whose answer never comes is
 *   recorded too, as `timeout`, `cancelled` or `disconnected` (unanswered.ts); one the client
 *   cancels by `notifications/cancelled` is recorded `cancelled` when that notification passes.
 *
 * Put in front of a backend only when there are rules or an audit: otherwise it costs nothing.
 */
// The module's `performance`, not the global one: `globalThis.performance` is a getter, about 180 instructions a read (issue 44).
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import type { BackendCallHeaders, BackendCaller, BackendResponse, McpBackend } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import { DecoratedBackend } from '../backends/decorated-backend.js';
import type { Config } from '../config/schema.js';
import type { Audit, AuditRequest, AuditSinks } from '../ops/audit.js';
import { LiveAudit } from '../ops/live-audit.js';
import type { Metrics } from '../ops/metrics.js';
import { ErrorCode, errorResponse, isBatchText, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { editAnswer, fieldOf, idKey, LIST_KEYS, type AnswerEdit, type ListKey, type StrictListRead } from './answer-edit.js';
import type { AnswerObserver } from './answer-observe.js';
import { AUDITED_METHODS, callerBase, outcomeOf, requestFacts } from './audit-calls.js';
import { derived } from '../config/live-config.js';
import type { StateStore } from '../state/store.js';
import { ApprovalStore } from './approvals.js';
import { ListedTools } from './listed-tools.js';
import { CelRules, type RuleDecision } from './cel-rules.js';
import { claimValues } from './backend-access.js';
import { policyVariables, type RequestFacts } from './policy-input.js';
import { toolListEntry } from './tool-policy.js';
import { failedCall, settledAtEnd, type Unanswered } from './unanswered.js';
import { messagesOf } from './tool-policy-backend.js';
import { InflightCalls } from './inflight-calls.js';
import { ByRequestId } from './by-request-id.js';
import { confirmHold, type ConfirmParts, type HoldOutcome } from './confirm-hold.js';
import { approvalEvents } from './approval-events.js';
import { approvalNotifier } from './approval-notify.js';

const UNJUDGED: ReadonlySet<string> = new Set(['initialize', 'ping', 'server/discover']);
/** MCP 2025-11-25 Resources, "Error Handling": the answer to a read of a resource that is not there. */
const RESOURCE_NOT_FOUND = -32002;

type Request = JsonRpcMessage & { id: JsonRpcId; method: string };
/**
 * A record waiting for its answer. `approval`: the approval of a `confirm` rule this call uses
 * (its record names it). `session`: the session whose cancellable calls hold it
 * (RulePolicyBackend), by `id`, its request's id; `records`: its POST's.
 */
type Pending = { base: AuditRequest; rule: string; approval?: string; session: string | undefined; id: JsonRpcId; records?: PendingRecords };
/** How a record is written: the face's, one function per backend (not per call). */
type WriteRecord = (p: Pending, started: number, outcome: Unanswered) => void;

/**
 * One POST's records waiting for their answers, by request id (by-request-id.ts): what the
 * answer's messages are told to (it is the answer's observer), what settles those left when the
 * answer ends or the call fails, and what a cancellation ends. One object per POST, no closure
 * per call (issue 44 part 1).
 */
class PendingRecords extends ByRequestId<Pending> implements AnswerObserver {
  constructor(
    private readonly write: WriteRecord,
    readonly started: number,
  ) {
    super();
  }

  /** Holds the record of request `id` as this POST's; a later request of the same id takes its place. */
  add(id: JsonRpcId, p: Pending): void {
    p.records = this;
    this.hold(id, p);
  }

  /** Each record waiting becomes cancellable: held in `inflight` under its session and id key. */
  holdIn(inflight: InflightCalls<Pending>): void {
    this.forEachHeld(holdCancellable, inflight);
  }

  /** A response message: its request's record, with its outcome. */
  observe(msg: JsonRpcMessage): void {
    if (msg.method !== undefined || (typeof msg.id !== 'string' && typeof msg.id !== 'number')) return;
    const p = this.take(msg.id);
    if (p) this.write(p, this.started, outcomeOf(msg));
  }

  /** The records still waiting, with how the answer ended (unanswered.ts). */
  settle(outcome: Unanswered): void {
    // Most answers carried their responses: nothing is left, and no closure is made.
    if (!this.holding) return;
    this.forEachHeld((p, how) => this.write(p, this.started, how), outcome);
    this.clear();
  }

  /** A client's `notifications/cancelled` for the request of record `p`: its record, now, if it still waits here. */
  cancel(p: Pending): void {
    if (this.release(p, p.id)) this.write(p, this.started, CANCELLED);
  }
}

const holdCancellable = (p: Pending, inflight: InflightCalls<Pending>) => inflight.add(p.session!, p.id, p);

const CANCELLED: Unanswered = Object.freeze({ outcome: 'cancelled' });

/** The edit of an answer with no list to filter. */
const NO_LIST_EDIT: Pick<AnswerEdit, 'listIds' | 'visible' | 'strict'> = Object.freeze({ listIds: new Map<string, ListKey>(), visible: () => true });

export interface RulePolicyParts {
  /** The rules of the config as it is now: compiled again after a reload changed it (config/live-config.ts). */
  rules: () => CelRules;
  /** The audit as the config has it now (ops/live-audit.ts); undefined while off. */
  audit: () => Audit | undefined;
  metrics: Metrics;
  /** Where `confirm` rules hold calls and find their approvals (issue 46). */
  confirm?: ConfirmParts;
}

export class RulePolicyBackend extends DecoratedBackend {
  /** The audited calls in flight, which a client's `notifications/cancelled` ends (inflight-calls.ts). */
  readonly #inflight = new InflightCalls<Pending>();
  readonly #writeRecord: WriteRecord = (p, started, outcome) => this.#write(p, started, outcome);

  constructor(
    inner: McpBackend,
    private readonly parts: RulePolicyParts,
  ) {
    super(inner);
  }

  post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    const caller = headers.caller;
    // No rules and no audit (the default): passed on untouched, before any parsing — this face
    // is on every backend so that a reload can turn either on. Not an async function: the
    // backend's own promise is handed back, without one more around it (issue 29).
    if (!caller || (!this.parts.rules().size && !this.parts.audit())) return this.inner.post(body, headers, signal);
    return this.#judged(body, headers, caller, signal);
  }

  /** With rules or the audit on: each request judged, recorded, and its answer edited or observed. */
  async #judged(body: string, headers: BackendCallHeaders, caller: BackendCaller, signal?: AbortSignal): Promise<BackendResponse> {
    const messages = messagesOf(body, caller);
    if (!messages) return this.inner.post(body, headers, signal);
    const started = performance.now();
    const errors: JsonRpcMessage[] = [];
    // Made only when needed: most POSTs are one allowed call (issue 44 part 1).
    let denied: Set<JsonRpcMessage> | undefined;
    let listIds: Map<string, ListKey> | undefined;
    const records = new PendingRecords(this.#writeRecord, started);
    for (const m of messages) {
      if (!isRequest(m) || UNJUDGED.has(m.method!)) continue;
      const facts = requestFacts(m, this.name);
      const rules = this.parts.rules();
      const decision = rules.size ? rules.decide(policyVariables(caller, facts, undefined, rules.readsRequest)) : undefined;
      const judged = decision && decision.effect !== 'allow' ? await this.#refusal(caller, m as Request, facts, decision, started) : undefined;
      const refusal = judged?.answer;
      if (refusal) {
        (denied ??= new Set()).add(m);
        errors.push(refusal);
      } else {
        const list = LIST_KEYS[m.method!];
        if (list && this.parts.rules().size) (listIds ??= new Map()).set(idKey(m.id!), list);
        if (this.parts.audit() && AUDITED_METHODS.has(m.method!)) this.#pend(records, caller, m as Request, facts, decision, started, judged?.approval);
      }
    }
    if (caller.sessionId) this.#cancellable(caller, caller.sessionId, messages, records);
    const rest = denied ? messages.filter((m) => !denied.has(m)) : messages;
    if (!rest.length || (denied && !isBatchText(body))) {
      const refusal = isBatchText(body) ? errors : errors[0]!;
      return { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(JSON.stringify(refusal)), refused: true };
    }
    const forward = denied ? JSON.stringify(rest.length === 1 ? rest[0] : rest) : body;
    let res: BackendResponse;
    try {
      res = await this.inner.post(forward, headers, signal);
    } catch (err) {
      records.settle(failedCall(this.name, err, signal));
      throw err;
    }
    if (res.status < 200 || res.status >= 300) records.settle({ outcome: 'error' });
    const waiting = records.holding;
    const lists = listIds ? this.#listEdit(caller, listIds, rest, forward) : NO_LIST_EDIT;
    // Its members named one by one: a spread of `lists` (of two shapes, one frozen) took V8's
    // slow object clone, about 1.6 k instructions a call (issue 44 part 1).
    const edited = editAnswer(res, { errors, listIds: lists.listIds, visible: lists.visible, strict: lists.strict, observe: waiting ? records : undefined });
    // A record still pending when the answer's body is done never got its response.
    return waiting ? settledAtEnd(this.name, edited, signal, records) : edited;
  }

  /** The parts of an answer's edit that filter its lists: which entries stay, and the strict read of the answer. */
  #listEdit(caller: BackendCaller, listIds: ReadonlyMap<string, ListKey>, rest: readonly JsonRpcMessage[], forward: string): Pick<AnswerEdit, 'listIds' | 'visible' | 'strict'> {
    const visible = (entry: unknown, key: ListKey) => {
      if (key === 'tools') this.parts.confirm?.tools.seen(this.name, entry);
      return this.#listable(caller, key, entry);
    };
    return { listIds, visible, strict: this.#strict(rest, forward, caller) };
  }

  /** What a list answer is read against; a refused one is logged and counted (issue 41 §1). */
  #strict(sent: readonly JsonRpcMessage[], forward: string, caller: BackendCaller): StrictListRead {
    const backend = this.name;
    return {
      backend,
      messages: sent,
      batch: isBatchText(forward),
      refused: (error) => {
        this.parts.metrics.backendErrors.inc({ backend, reason: 'unreadable_answer' });
        caller.log.warn({ backend, unreadable: error.rpcData.unreadable }, 'list answer refused: policy.rules cannot filter it');
      },
    };
  }

  /**
   * A denied request's answer, or a `confirm` rule's: the call held until the caller approves
   * it (confirm-hold.ts), or no answer when an approval lets it through now (the approval it
   * uses, for its record). Without the store for approvals (a hand-built gateway) a confirm
   * rule refuses as a deny rule does.
   */
  async #refusal(caller: BackendCaller, m: Request, facts: RequestFacts, decision: RuleDecision, started: number): Promise<HoldOutcome> {
    if (decision.effect !== 'confirm' || !this.parts.confirm) return { answer: this.#refuse(caller, m, facts, decision, started) };
    return confirmHold(this.parts.confirm, caller, m.id, facts, decision, this.parts.rules().version);
  }

  /** The denial's answer; its record and count. */
  #refuse(caller: BackendCaller, m: Request, facts: RequestFacts, decision: RuleDecision, started: number): JsonRpcMessage {
    this.parts.metrics.policyDenials.inc({ backend: this.name, reason: 'rule' });
    caller.log.info({ backend: this.name, method: m.method, rule: decision.rule }, 'request refused by policy rule');
    const answer = this.#asMissing(caller, m, facts) ?? errorResponse(m.id, ErrorCode.AccessDenied, 'Access denied by policy');
    this.parts.audit()?.recordOf(callerBase(caller, facts, m), { event: 'refusal', decision: 'deny', rule: decision.rule, outcome: 'error', code: answer.error!.code, durationMs: performance.now() - started });
    return answer;
  }

  /** An allowed request to record when its answer passes — or now, when the tool lists refuse it. */
  #pend(records: PendingRecords, caller: BackendCaller, m: Request, facts: RequestFacts, decision: RuleDecision | undefined, started: number, approval?: string): void {
    const base = callerBase(caller, facts, m);
    const entry = m.method === 'tools/call' ? toolListEntry(this.config, facts.tool ?? '') : undefined;
    if (entry && !entry.allowed) {
      this.parts.audit()?.recordOf(base, { event: 'refusal', decision: 'deny', rule: entry.rule, outcome: 'error', code: ErrorCode.InvalidParams, durationMs: performance.now() - started });
      return;
    }
    const rule = decision && decision.rule !== 'policy.default' ? decision.rule : (entry?.rule ?? 'policy.default');
    const p: Pending = { base, rule, session: caller.sessionId, id: m.id };
    if (approval) p.approval = approval;
    records.add(m.id, p);
  }

  /** Registers this POST's pending records as cancellable, and ends those a `notifications/cancelled` in it names. */
  #cancellable(caller: BackendCaller, session: string, messages: readonly JsonRpcMessage[], records: PendingRecords): void {
    records.holdIn(this.#inflight);
    for (const m of messages) {
      const requestId = m.method === 'notifications/cancelled' ? (m.params as { requestId?: unknown } | undefined)?.requestId : undefined;
      if (typeof requestId !== 'string' && typeof requestId !== 'number') continue;
      const p = this.#inflight.get(session, requestId);
      if (p && p.base.userKey === caller.principal.userKey) p.records?.cancel(p);
    }
  }

  /** Forgets a call among the cancellable ones (its record is being written), unless a later call of its id took its place. */
  #settled(p: Pending): void {
    this.#inflight.delete(p.session!, p.id, p);
  }

  #write(p: Pending, started: number, outcome: Unanswered): void {
    if (p.session !== undefined) this.#settled(p);
    this.parts.audit()?.recordOf(p.base, { event: 'call', decision: 'allow', rule: p.rule, approval: p.approval, outcome: outcome.outcome, code: outcome.code, durationMs: performance.now() - started });
  }

  /**
   * The answer to a denied request for something its list hides, as if it did not exist (so
   * nothing leaks); undefined for other denials. A read names its URI, so its decision was
   * exact: no read of it can be allowed, and no list shows it.
   */
  #asMissing(caller: BackendCaller, m: Request, facts: RequestFacts): JsonRpcMessage | undefined {
    if (m.method === 'tools/call' && !this.#listable(caller, 'tools', { name: facts.tool })) return errorResponse(m.id, ErrorCode.InvalidParams, `Unknown tool: ${facts.tool}`);
    if (m.method === 'prompts/get' && !this.#listable(caller, 'prompts', { name: facts.prompt })) return errorResponse(m.id, ErrorCode.InvalidParams, `Unknown prompt: ${facts.prompt}`);
    if (m.method === 'resources/read') return errorResponse(m.id, RESOURCE_NOT_FOUND, 'Resource not found');
    return undefined;
  }

  /** Whether a list shows the entry: some request for it could be allowed (cel-rules.ts). */
  #listable(caller: BackendCaller, key: ListKey, entry: unknown): boolean {
    const rules = this.parts.rules();
    if (!rules.size) return true;
    const backend = this.name;
    switch (key) {
      case 'tools':
        return rules.couldAllow(policyVariables(caller, { method: 'tools/call', backend, tool: fieldOf(entry, 'name') }, 'arguments', rules.readsRequest));
      case 'prompts':
        return rules.couldAllow(policyVariables(caller, { method: 'prompts/get', backend, prompt: fieldOf(entry, 'name') }, 'arguments', rules.readsRequest));
      case 'resources':
        return rules.decide(policyVariables(caller, { method: 'resources/read', backend, uri: fieldOf(entry, 'uri') }, undefined, rules.readsRequest)).effect === 'allow';
      case 'resourceTemplates':
        return rules.couldAllow(policyVariables(caller, { method: 'resources/read', backend }, 'uri', rules.readsRequest), 'uri');
    }
  }
}

/**
 * The live audit (ops/live-audit.ts: reopened when a reload changes `audit`) and the face that
 * puts the rules and the audit in front of a backend (backend-set.ts applies it to every
 * backend, at start and to those a reload adds). `store`: where `confirm` rules keep held
 * calls and approvals (the shared store: the retry may come to any replica). The face is always there, so a reload can turn
 * on the first rule or the audit; with neither it passes each request on before parsing it
 * (bench/policy-cost.ts "off"). The rules follow the live config. `log`: where the
 * `approvals.notify` webhook's failures are logged (approval-notify.ts); without it, no webhook.
 */
export function rulePolicyFace(config: Config, metrics: Metrics, sinks: AuditSinks = {}, store?: StateStore, log?: FastifyBaseLogger): { audit: LiveAudit; face: (backend: McpBackend) => McpBackend } {
  const tenantClaim = config.auth.tenantClaim;
  const audit = new LiveAudit(config, sinks, (claims) => (tenantClaim ? claimValues(claims, tenantClaim)[0] : undefined));
  const rules = derived(config, (c) => new CelRules(c.policy));
  const notify = log ? approvalNotifier(config, { metrics, log }) : undefined;
  const confirm = store ? { approvals: new ApprovalStore(store, approvalEvents({ audit: () => audit.current, notify })), publicUrl: config.publicUrl, tools: new ListedTools() } : undefined;
  return { audit, face: (backend) => new RulePolicyBackend(backend, { rules, audit: () => audit.current, metrics, ...(confirm ? { confirm } : {}) }) };
}
