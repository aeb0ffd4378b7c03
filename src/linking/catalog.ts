/**
 * What the gateway may show of a backend that needs the user's own account to a user who
 * has not linked it yet (SPEC §8 "Linking"). Hosted MCP servers answer 401 to everything
 * without the user's token (MCP 2025-11-25 "Authorization" §2.1), so without this a user
 * could not even connect: the gateway answers for the backend until the link exists.
 *
 * A hosted server's lists are its user's data — files, mail, repositories, tools that follow
 * the user's scopes and organisation — so what is shown to one user may come only from that
 * user's own token or from something that carries nobody's data (issue 28 §1):
 *
 * 1. the operator's declaration (`upstreamAuth.catalog`: tools and prompts);
 * 2. what the backend answered to no token at all (`initialize` and any list), kept per
 *    backend: nobody's data by construction;
 * 3. tools and prompts seen with some user's token, only where the operator opted in
 *    (`upstreamAuth.shareCatalog`) for a backend whose surface is the same for everyone.
 *    Never resources, resource templates or `instructions`, and never `initialize`.
 *
 * Anything else a user's token brought is not kept. Kept in the shared store so every
 * replica answers alike, under names a gateway before issue 28 never wrote: the entries it
 * stored from whoever's token came last are not read.
 */
import type { BackendConfig } from '../config/schema.js';
import type { ShareableList } from '../config/linking-schema.js';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

/** The part of a backend's `initialize` result the gateway can repeat to another client. */
export interface InitializeSnapshot {
  capabilities: Record<string, unknown>;
  serverInfo?: Record<string, unknown>;
  instructions?: string;
}

/** Whose token an answer was obtained with: nobody's, or the user's whose request it was. */
export type Provenance = 'anonymous' | 'user';

/** The list methods a catalog keeps, with the key of the result that holds the items. */
export const CATALOG_LISTS: Readonly<Record<string, string>> = {
  'tools/list': 'tools',
  'prompts/list': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resourceTemplates',
};

/** The list methods an operator may share (`upstreamAuth.shareCatalog`), by their config name. */
const SHAREABLE_METHODS: Readonly<Record<string, ShareableList>> = { 'tools/list': 'tools', 'prompts/list': 'prompts' };

/** Long enough to outlive quiet weeks; refreshed by every sighting. */
const RETENTION_MS = 30 * 24 * 60 * 60_000;
/** A catalog entry is repeated to clients: a backend must not make the store hold megabytes of it. */
const MAX_ENTRY_BYTES = 512 * 1024;

export class BackendCatalog {
  constructor(
    private readonly store: StateStore,
    private readonly log: { warn(obj: object, msg: string): void },
  ) {}

  /** The backend's answer to an `initialize` without a token, if it ever gave one. */
  async initialize(backend: BackendConfig): Promise<InitializeSnapshot | undefined> {
    return this.#read<InitializeSnapshot>(ValueKeys.catalogAnonymous(backend.name, 'initialize'));
  }

  /**
   * Remembers a successful `initialize` result (best effort: a failure is logged, not thrown).
   * Only one obtained without a token: a user's carries their `instructions` and more.
   */
  async rememberInitialize(backend: BackendConfig, result: unknown, provenance: Provenance): Promise<void> {
    if (provenance !== 'anonymous' || !isObject(result)) return;
    const { capabilities, serverInfo, instructions } = result;
    const snapshot: InitializeSnapshot = { capabilities: isObject(capabilities) ? capabilities : {} };
    if (isObject(serverInfo)) snapshot.serverInfo = serverInfo;
    if (typeof instructions === 'string') snapshot.instructions = instructions;
    await this.#write(ValueKeys.catalogAnonymous(backend.name, 'initialize'), snapshot);
  }

  /** The first page of a list (its whole result) a user who has not linked may see, from the first source that has one. */
  async list(backend: BackendConfig, method: string): Promise<Record<string, unknown> | undefined> {
    const key = CATALOG_LISTS[method];
    if (!key) return undefined;
    const declared = backend.upstreamAuth?.catalog?.[key as 'tools' | 'prompts'];
    if (declared) return { [key]: declared };
    const anonymous = await this.#read<Record<string, unknown>>(ValueKeys.catalogAnonymous(backend.name, method));
    if (anonymous || !shares(backend, method)) return anonymous;
    return this.#read<Record<string, unknown>>(ValueKeys.catalogShared(backend.name, method));
  }

  /**
   * Remembers the first page of a list the backend answered (best effort): one obtained
   * without a token always; one obtained with a user's token only where the operator shares it.
   */
  async rememberList(backend: BackendConfig, method: string, result: unknown, provenance: Provenance): Promise<void> {
    const key = CATALOG_LISTS[method];
    if (!key || !keepsList(backend, method, provenance) || !isObject(result) || !Array.isArray(result[key])) return;
    await this.#write(provenance === 'anonymous' ? ValueKeys.catalogAnonymous(backend.name, method) : ValueKeys.catalogShared(backend.name, method), result);
  }

  async #read<T>(key: string): Promise<T | undefined> {
    try {
      const text = await this.store.getValue(key);
      return text === undefined ? undefined : (JSON.parse(text) as T);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'backend catalog unreadable; answering without it');
      return undefined;
    }
  }

  async #write(key: string, value: unknown): Promise<void> {
    const text = JSON.stringify(value);
    if (text.length > MAX_ENTRY_BYTES) return;
    await this.store.putValue(key, text, RETENTION_MS).catch((err: Error) => this.log.warn({ err: err.message }, 'could not update the backend catalog'));
  }
}

/** Whether a first-page list obtained this way is kept (so the answer is worth reading whole). */
export function keepsList(backend: BackendConfig, method: string, provenance: Provenance): boolean {
  return method in CATALOG_LISTS && (provenance === 'anonymous' || shares(backend, method));
}

/** Whether the operator lets users who have not linked see this list as another user saw it. */
export function shares(backend: BackendConfig, method: string): boolean {
  const kind = SHAREABLE_METHODS[method];
  return kind !== undefined && (backend.upstreamAuth?.shareCatalog ?? []).includes(kind);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return Boolean(value) && typeof value === 'object' && !Array.isArray(value);
}
