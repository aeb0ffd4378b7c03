/**
 * What a virtual server (issue 31 §1, docs/virtual-servers.md) shows of its backends, worked
 * out once from its config entry: each offered tool and prompt name with the backend item it
 * stands for (`{backend}__{name}` as the aggregated layer knows it, names.ts), and the URI
 * prefixes of resources per backend. Like names.ts, every lookup is a pure function of the
 * config and the name, so any replica answers the same.
 *
 * Resource URIs are offered as `/mcp` offers them (`{backend}+{uri}`): two backends may use
 * the same URI, and routing stays a function of the URI. A `ui://` resource (MCP Apps,
 * SEP-1865: UI resources use that scheme) of a backend that gives the server a tool is
 * readable even when no resource entry selects it, so a renamed tool's
 * `_meta.ui.resourceUri` keeps working; it is not listed.
 */
import { offeredName, type PromptEntry, type ServerConfig, type ToolEntry } from '../config/servers-schema.js';
import { qualifyName, splitName, splitUri } from './names.js';

/** A selected item: the backend it comes from, its name there, and the name the aggregated layer gives it. */
export interface Selected<E> {
  entry: E;
  backend: string;
  name: string;
  qualified: string;
  offered: string;
  /** `servers[i].tools[j]`: named in the log when the backend's definition contradicts the entry. */
  key: string;
}

function select<E extends { from: string; as?: string }>(entries: readonly E[], key: string): Array<Selected<E>> {
  return entries.map((entry, j) => {
    const at = entry.from.indexOf('.');
    const backend = entry.from.slice(0, at);
    const name = entry.from.slice(at + 1);
    return { entry, backend, name, qualified: qualifyName(backend, name), offered: offeredName(entry), key: `${key}[${j}]` };
  });
}

export class Selection {
  /** The server's name, for logs. */
  readonly name: string;
  readonly tools: ReadonlyArray<Selected<ToolEntry>>;
  readonly prompts: ReadonlyArray<Selected<PromptEntry>>;
  /** Every backend an entry names: the members of the server's sessions. */
  readonly backends: ReadonlySet<string>;
  readonly #toolsByOffered: ReadonlyMap<string, Selected<ToolEntry>>;
  readonly #toolsByQualified: ReadonlyMap<string, Selected<ToolEntry>>;
  readonly #promptsByOffered: ReadonlyMap<string, Selected<PromptEntry>>;
  readonly #promptsByQualified: ReadonlyMap<string, Selected<PromptEntry>>;
  readonly #prefixes: ReadonlyMap<string, readonly string[]>;
  readonly #toolBackends: ReadonlySet<string>;

  constructor(server: ServerConfig, index: number) {
    this.name = server.name;
    this.tools = select(server.tools, `servers[${index}].tools`);
    this.prompts = select(server.prompts, `servers[${index}].prompts`);
    this.#toolsByOffered = new Map(this.tools.map((t) => [t.offered, t]));
    this.#toolsByQualified = new Map(this.tools.map((t) => [t.qualified, t]));
    this.#promptsByOffered = new Map(this.prompts.map((p) => [p.offered, p]));
    this.#promptsByQualified = new Map(this.prompts.map((p) => [p.qualified, p]));
    const prefixes = new Map<string, string[]>();
    for (const r of server.resources) prefixes.set(r.from, [...(prefixes.get(r.from) ?? []), r.uriPrefix]);
    this.#prefixes = prefixes;
    this.#toolBackends = new Set(this.tools.map((t) => t.backend));
    this.backends = new Set([...this.#toolBackends, ...this.prompts.map((p) => p.backend), ...prefixes.keys()]);
  }

  toolByOffered(name: unknown): Selected<ToolEntry> | undefined {
    return typeof name === 'string' ? this.#toolsByOffered.get(name) : undefined;
  }

  toolByQualified(name: unknown): Selected<ToolEntry> | undefined {
    return typeof name === 'string' ? this.#toolsByQualified.get(name) : undefined;
  }

  promptByOffered(name: unknown): Selected<PromptEntry> | undefined {
    return typeof name === 'string' ? this.#promptsByOffered.get(name) : undefined;
  }

  promptByQualified(name: unknown): Selected<PromptEntry> | undefined {
    return typeof name === 'string' ? this.#promptsByQualified.get(name) : undefined;
  }

  /** Whether any resource entry is configured (else resource lists are empty without asking the members). */
  get hasResources(): boolean {
    return this.#prefixes.size > 0;
  }

  /** Whether a resource entry selects this qualified URI (or URI template): it is listed and readable. */
  listsResource(qualifiedUri: unknown): boolean {
    const uri = splitUri(qualifiedUri);
    return Boolean(uri && this.#prefixes.get(uri.backend)?.some((prefix) => uri.value.startsWith(prefix)));
  }

  /** Whether a client may read (subscribe to, complete) this qualified URI: selected, or the UI resource of a tool's backend. */
  readsResource(qualifiedUri: unknown): boolean {
    if (this.listsResource(qualifiedUri)) return true;
    const uri = splitUri(qualifiedUri);
    return Boolean(uri && uri.value.startsWith('ui://') && this.#toolBackends.has(uri.backend));
  }

  /**
   * Whether a member's notification concerns what this server offers (`list_changed` and
   * `resources/updated` are narrowed; everything else — progress, logs, cancellations — is a
   * message about the client's own requests or the session, and passes). Per member: a
   * `tools/list_changed` from a backend that gives the server no tool cannot change its list.
   */
  keeps(backend: string, notification: { method?: unknown; params?: unknown }): boolean {
    switch (notification.method) {
      case 'notifications/tools/list_changed':
        return this.#toolBackends.has(backend);
      case 'notifications/prompts/list_changed':
        return this.prompts.some((p) => p.backend === backend);
      case 'notifications/resources/list_changed':
        return this.#prefixes.has(backend);
      case 'notifications/resources/updated':
        return this.readsResource((notification.params as { uri?: unknown } | undefined)?.uri);
      default:
        return true;
    }
  }

  /**
   * The gateway's `connect` tool of a member whose account is not linked (linking/provisional.ts,
   * `{backend}__connect`): offered under that name so the model can lead the user to the link.
   */
  isConnectTool(qualified: unknown): boolean {
    const name = splitName(qualified);
    return Boolean(name && name.value === 'connect' && this.#toolBackends.has(name.backend) && !this.#toolsByQualified.has(qualified as string));
  }
}
