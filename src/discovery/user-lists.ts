/**
 * The tools one user sees on one endpoint, as the endpoint listed them (issue 31 §3), kept a
 * short while in this process so that `search_tools` costs no backend round trip.
 *
 * The aggregated endpoints keep no list of their own: each `tools/list` walks the members,
 * whose answers depend on the user (tool policy, linked accounts, tenants). So the list is
 * read here through the endpoint itself — every page, as the user's `tools/list` would see
 * it, policy applied — and kept per endpoint, user and session (a session may lack a member
 * that was slow at initialize). It is refreshed by every `tools/list` the client sends (which
 * is what a client does on `notifications/tools/list_changed`), dropped when such a
 * notification passes on the session's stream, and forgotten after {@link TTL_MS}, so a list
 * changed without notice is read again within that time. Another replica reads it once for itself.
 */
import type { BackendCallHeaders, McpBackend } from '../backends/backend.js';
import { collectMessages } from '../backends/backend-body.js';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';
import { forgetIndexes, listDigest } from './tool-index.js';

type Json = Record<string, unknown>;

/** How long a list read for searches stays good without a `tools/list` or a notification. */
export const TTL_MS = 60_000;
/** Lists kept at most (least recently stored dropped first). */
const MAX_LISTS = 10_000;
/** Pages walked for one list: bounded, whatever a member's cursors do. */
const MAX_PAGES = 100;

/** A user's whole tool list: its tools, their digest (the index key), and the first page's answer as the endpoint gave it. */
export interface ToolList {
  tools: Json[];
  digest: string;
  first: JsonRpcMessage;
}

/** Reads every page of the user's `tools/list` through the endpoint; the endpoint's error answer when it refuses. */
export async function readToolList(inner: McpBackend, headers: BackendCallHeaders, request: JsonRpcMessage & { id: JsonRpcId }): Promise<ToolList | { error: JsonRpcMessage }> {
  const params = (request.params ?? {}) as Json;
  const tools: Json[] = [];
  let first: JsonRpcMessage | undefined;
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const body = JSON.stringify({ jsonrpc: '2.0', id: request.id, method: 'tools/list', params: cursor === undefined ? params : { ...params, cursor } });
    const answer = (await collectMessages(await inner.post(body, headers))).messages.find((m) => m.id === request.id && ('result' in m || 'error' in m));
    if (!answer?.result) return { error: answer ?? { jsonrpc: '2.0', id: request.id, error: { code: -32603, message: 'no answer to tools/list' } } };
    first ??= answer;
    const result = answer.result as Json;
    if (Array.isArray(result.tools)) tools.push(...(result.tools as unknown[]).filter((t): t is Json => typeof t === 'object' && t !== null));
    cursor = typeof result.nextCursor === 'string' && result.nextCursor ? result.nextCursor : undefined;
    if (!cursor) break;
  }
  return { tools, digest: listDigest(tools), first: first! };
}

/** The store's mark of a list that changed: no list has this digest, so every replica reads the list again. */
const CHANGED = 'changed';

export class UserLists {
  readonly #lists = new Map<string, { list: ToolList; expires: number }>();

  constructor(
    private readonly endpoint: string,
    private readonly store: StateStore,
  ) {}

  #key(headers: BackendCallHeaders): string | undefined {
    const caller = headers.caller;
    // The gateway's session, not `headers.sessionId`: an aggregated endpoint's is its member map, which changes as members join.
    return caller === undefined ? undefined : ValueKeys.toolSearchList(caller.principal.userKey, caller.sessionId ?? '', this.endpoint);
  }

  /** The kept list, when it is still the one the session last listed on any replica (one store read, no backend). */
  async get(headers: BackendCallHeaders): Promise<ToolList | undefined> {
    const key = this.#key(headers);
    const kept = key === undefined ? undefined : this.#lists.get(key);
    if (!kept) return undefined;
    if (kept.expires > Date.now()) {
      const listed = await this.store.getValue(key!);
      if (listed === undefined || listed === kept.list.digest) return kept.list;
    }
    this.#lists.delete(key!);
    return undefined;
  }

  async set(headers: BackendCallHeaders, list: ToolList): Promise<void> {
    const key = this.#key(headers);
    if (key === undefined) return;
    this.#lists.delete(key);
    this.#lists.set(key, { list, expires: Date.now() + TTL_MS });
    if (this.#lists.size > MAX_LISTS) this.#lists.delete(this.#lists.keys().next().value!);
    await this.store.putValue(key, list.digest, TTL_MS);
  }

  /**
   * Every list kept here is read again before its next search, and their indexes are dropped:
   * the gateway changed what the endpoint lists for everyone (a pin approval, pinning/pinning.ts;
   * a reload, reload/list-changes.ts). Each replica does it for itself when it hears of the
   * change (or applies its file), so the store needs no mark.
   */
  forgetAll(): void {
    forgetIndexes([...this.#lists.values()].map((kept) => kept.list.digest));
    this.#lists.clear();
  }

  /** The session's list changed (a `list_changed` passed): every replica reads it again before its next search. */
  async changed(headers: BackendCallHeaders): Promise<void> {
    const key = this.#key(headers);
    if (key === undefined) return;
    this.#lists.delete(key);
    await this.store.putValue(key, CHANGED, TTL_MS);
  }
}
