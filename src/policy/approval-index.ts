/**
 * The indexes of open approvals (issue 46 §3, §5), so that `/approvals` lists them without
 * scanning the store and an expired request is noticed and audited once:
 *
 * - `<userKey>:approvals-open` (ValueKeys.approvalsOpen): the caller's open requests, a field
 *   per approval — pending, or approved and not used yet — at most {@link MAX_OPEN_PER_USER};
 * - `approval-queue:<rule>` (ValueKeys.approvalQueue): the pending requests of a four-eyes
 *   rule, a field per approval naming its caller's key, at most {@link MAX_QUEUE_PER_RULE}:
 *   an approver's list reads the queues of the rules whose `approvers` their claims match.
 *
 * Fields carry no expiry of their own (StateStore fields), so each read drops those past their
 * `expiresAt`. Whoever deletes an entry's field in its caller's open index is the one replica
 * that records its expiry ({@link ApprovalEvents.expired}); a decision or a use deletes it
 * first, so a request that was decided for good, or used, never expires in the audit.
 */
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

/** What the indexes keep of a request: enough to list it and to audit its expiry without its record. */
export interface OpenEntry {
  id: string;
  userKey: string;
  rule: string;
  backend: string;
  tool: string;
  argumentsHash: string;
  expiresAt: number;
  /** Whether someone else must approve it (four-eyes). */
  fourEyes: boolean;
  /** The caller as the access token names them. */
  callerLabel: string;
}

/** What is told of a request's life (approval-events.ts: the audit records, the webhook). */
export interface ApprovalEventsSink {
  expired(entry: OpenEntry): void;
}

/** Open requests one caller may have at once; another call to hold is refused. */
export const MAX_OPEN_PER_USER = 50;
/** Pending requests one four-eyes rule may have at once, over all callers. */
export const MAX_QUEUE_PER_RULE = 500;

export class ApprovalIndex {
  constructor(
    private readonly store: StateStore,
    private readonly events?: ApprovalEventsSink,
  ) {}

  /** Whether the caller (and the rule's queue, for four-eyes) has room for another request; expired entries are dropped first. */
  async room(userKey: string, rule: string, fourEyes: boolean): Promise<boolean> {
    if ((await this.open(userKey)).length >= MAX_OPEN_PER_USER) return false;
    return !fourEyes || (await this.queued(rule)).length < MAX_QUEUE_PER_RULE;
  }

  async add(entry: OpenEntry): Promise<void> {
    await this.store.putField(ValueKeys.approvalsOpen(entry.userKey), entry.id, JSON.stringify(entry));
    if (entry.fourEyes) await this.store.putField(ValueKeys.approvalQueue(entry.rule), entry.id, JSON.stringify(entry));
  }

  /** The request is no longer waiting for a decision (decided): out of its rule's queue; `done` (denied, used) out of the caller's open list too. */
  async closed(entry: Pick<OpenEntry, 'id' | 'userKey' | 'rule'>, done: boolean): Promise<void> {
    await this.store.deleteField(ValueKeys.approvalQueue(entry.rule), entry.id);
    if (done) await this.store.deleteField(ValueKeys.approvalsOpen(entry.userKey), entry.id);
  }

  /** The caller's live open requests; the expired ones are dropped (and audited by whoever drops them). */
  async open(userKey: string): Promise<OpenEntry[]> {
    return this.#live(await this.store.getFields(ValueKeys.approvalsOpen(userKey)), (entry) => this.#expire(entry));
  }

  /** A four-eyes rule's live pending requests, over all callers. */
  async queued(rule: string): Promise<OpenEntry[]> {
    return this.#live(await this.store.getFields(ValueKeys.approvalQueue(rule)), (entry) => this.#expire(entry));
  }

  async #live(fields: Record<string, string>, expire: (entry: OpenEntry) => Promise<void>): Promise<OpenEntry[]> {
    const now = Date.now();
    const live: OpenEntry[] = [];
    for (const text of Object.values(fields)) {
      const entry = parse(text);
      if (!entry) continue;
      if (entry.expiresAt > now) live.push(entry);
      else await expire(entry);
    }
    return live.sort((a, b) => a.expiresAt - b.expiresAt);
  }

  async #expire(entry: OpenEntry): Promise<void> {
    if (await this.store.deleteField(ValueKeys.approvalsOpen(entry.userKey), entry.id)) this.events?.expired(entry);
    if (entry.fourEyes) await this.store.deleteField(ValueKeys.approvalQueue(entry.rule), entry.id);
  }
}

function parse(text: string): OpenEntry | undefined {
  try {
    const entry = JSON.parse(text) as OpenEntry;
    return typeof entry.id === 'string' && typeof entry.expiresAt === 'number' ? entry : undefined;
  } catch {
    return undefined;
  }
}
