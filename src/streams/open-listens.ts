/**
 * The `subscriptions/listen` streams of 2026-07-28 clients this replica holds open (MCP
 * 2026-07-28 "Subscriptions"), so that what the gateway itself changes — a pin approval
 * (pinning/), a reload that removes a member or changes a virtual server (reload/list-changes.ts)
 * — reaches them as the `notifications/{tools,prompts,resources}/list_changed` a 2025-11-25
 * session hears on its standalone GET stream. Those clients have no session and no GET stream:
 * without this they would hear of the change only at their next list.
 *
 * Each listen is kept under the endpoint it was opened on (`/mcp/{backend}`, a virtual server,
 * or `/mcp`) and its user, with the lists it was acknowledged for and its subscription id: a
 * notice goes only to listens of the endpoints the change touches, and only for a list the
 * listen asked for and was told it would hear. A `list_changed` carries no data, but one user's
 * listen is never handed another endpoint's notice.
 */

/** The lists whose changes a listen may ask for (`toolsListChanged`, `promptsListChanged`, `resourcesListChanged`). */
export type ListKind = 'tools' | 'prompts' | 'resources';

export const LIST_KINDS: readonly ListKind[] = ['tools', 'prompts', 'resources'];

export interface OpenListen {
  /** The user who opened it. */
  userKey: string;
  /** The endpoint it was opened on: a backend's or virtual server's name, or the aggregated endpoint's. */
  endpoint: string;
  /** The lists the client was acknowledged for. */
  lists: ReadonlySet<ListKind>;
  /** `_meta["io.modelcontextprotocol/subscriptionId"]` of everything sent on it. */
  subscriptionId: string | number;
  /** Writes one whole JSON-RPC message on the stream, between its events. */
  write(message: string): void;
  /**
   * Ends the listen as a server ends one (MCP 2026-07-28 "Subscriptions": the listen's own
   * result, tagged, then the end of the stream): its endpoint is gone (a reload removed it).
   */
  end(): void;
}

/** The lists a listen filter asks for (its `notifications` object). */
export function listsAsked(filter: unknown): Set<ListKind> {
  const asked = new Set<ListKind>();
  if (typeof filter !== 'object' || filter === null) return asked;
  for (const kind of LIST_KINDS) if ((filter as Record<string, unknown>)[`${kind}ListChanged`] === true) asked.add(kind);
  return asked;
}

/** `notifications/{list}/list_changed`, tagged with the listen's subscription id. */
/** The listen's own result, the last message of its stream (MCP 2026-07-28 "Subscriptions"). */
export function listenResultFor(id: unknown, subscriptionId: string | number): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result: { _meta: { 'io.modelcontextprotocol/subscriptionId': subscriptionId } } });
}

export function listChangedFor(listen: Pick<OpenListen, 'subscriptionId'>, kind: ListKind): string {
  return JSON.stringify({ jsonrpc: '2.0', method: `notifications/${kind}/list_changed`, params: { _meta: { 'io.modelcontextprotocol/subscriptionId': listen.subscriptionId } } });
}

export class OpenListens {
  /** Endpoint → user → that user's listens there. */
  readonly #byEndpoint = new Map<string, Map<string, Set<OpenListen>>>();

  /** Keeps the listen until the returned function is called (its stream closed or ended). */
  add(listen: OpenListen): () => void {
    let users = this.#byEndpoint.get(listen.endpoint);
    if (!users) this.#byEndpoint.set(listen.endpoint, (users = new Map()));
    let own = users.get(listen.userKey);
    if (!own) users.set(listen.userKey, (own = new Set()));
    own.add(listen);
    return () => {
      own.delete(listen);
      if (own.size) return;
      if (users.get(listen.userKey) === own) users.delete(listen.userKey);
      if (!users.size && this.#byEndpoint.get(listen.endpoint) === users) this.#byEndpoint.delete(listen.endpoint);
    };
  }

  /** The endpoints with a listen open here. */
  endpoints(): string[] {
    return [...this.#byEndpoint.keys()];
  }

  /**
   * Tells every listen of `endpoint` that `kinds` changed, each only of the lists it asked for.
   * Returns how many notifications were written.
   */
  tell(endpoint: string, kinds: readonly ListKind[]): number {
    let sent = 0;
    for (const own of this.#byEndpoint.get(endpoint)?.values() ?? []) {
      for (const listen of own) {
        for (const kind of kinds) {
          if (!listen.lists.has(kind)) continue;
          listen.write(listChangedFor(listen, kind));
          sent++;
        }
      }
    }
    return sent;
  }

  /** Ends every listen of `endpoint` (a backend a reload removed); each forgets itself as its stream ends. */
  endAll(endpoint: string): number {
    const ending = [...(this.#byEndpoint.get(endpoint)?.values() ?? [])].flatMap((own) => [...own]);
    for (const listen of ending) listen.end();
    return ending.length;
  }

  get size(): number {
    let n = 0;
    for (const users of this.#byEndpoint.values()) for (const own of users.values()) n += own.size;
    return n;
  }
}
