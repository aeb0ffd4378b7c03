/**
 * What the gateway last saw of a backend that needs the user's own account (SPEC §8
 * "Linking"): its `initialize` result (capabilities, `serverInfo`, `instructions`) and the
 * first page of each of its lists. Hosted MCP servers answer 401 to everything without the
 * user's token (MCP 2025-11-25 "Authorization" §2.1: every request carries the token), so
 * a user who has not linked the account yet could not even connect. With this catalog the
 * gateway answers for the backend until the link exists: the client connects, sees what
 * the server offers, and a call is what leads to the link.
 *
 * Kept per backend in the shared store, so every replica answers alike; refreshed by every
 * successful backend `initialize` and first-page list, whoever's session made it. Lists are
 * the same for every user of a backend as far as the gateway can tell; each user's access
 * policy is applied when they are served, never when they are stored.
 */
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';

/** The part of a backend's `initialize` result the gateway can repeat to another client. */
export interface InitializeSnapshot {
  capabilities: Record<string, unknown>;
  serverInfo?: Record<string, unknown>;
  instructions?: string;
}

/** The list methods a catalog keeps, with the key of the result that holds the items. */
export const CATALOG_LISTS: Readonly<Record<string, string>> = {
  'tools/list': 'tools',
  'prompts/list': 'prompts',
  'resources/list': 'resources',
  'resources/templates/list': 'resourceTemplates',
};

/** Long enough to outlive quiet weeks; refreshed by every sighting. */
const RETENTION_MS = 30 * 24 * 60 * 60_000;
/** A catalog entry is repeated to clients: a backend must not make the store hold megabytes of it. */
const MAX_ENTRY_BYTES = 512 * 1024;

export class BackendCatalog {
  constructor(
    private readonly store: StateStore,
    private readonly log: { warn(obj: object, msg: string): void },
  ) {}

  async initialize(backend: string): Promise<InitializeSnapshot | undefined> {
    return this.#read<InitializeSnapshot>(initializeKey(backend));
  }

  /** Remembers a successful `initialize` result of the backend (best effort: a failure is logged, not thrown). */
  async rememberInitialize(backend: string, result: unknown): Promise<void> {
    if (!result || typeof result !== 'object') return;
    const { capabilities, serverInfo, instructions } = result as Record<string, unknown>;
    const snapshot: InitializeSnapshot = { capabilities: isObject(capabilities) ? capabilities : {} };
    if (isObject(serverInfo)) snapshot.serverInfo = serverInfo;
    if (typeof instructions === 'string') snapshot.instructions = instructions;
    await this.#write(initializeKey(backend), snapshot);
  }

  /** The first page of a list (its whole result), as the backend last gave it. */
  async list(backend: string, method: string): Promise<Record<string, unknown> | undefined> {
    if (!(method in CATALOG_LISTS)) return undefined;
    return this.#read<Record<string, unknown>>(listKey(backend, method));
  }

  /** Remembers the first page of a list the backend answered (best effort). */
  async rememberList(backend: string, method: string, result: unknown): Promise<void> {
    const key = CATALOG_LISTS[method];
    if (!key || !isObject(result) || !Array.isArray(result[key])) return;
    await this.#write(listKey(backend, method), result);
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

function isObject(value: unknown): value is Record<string, unknown> {
  return Boolean(value) && typeof value === 'object' && !Array.isArray(value);
}

const initializeKey = ValueKeys.catalogInitialize;
const listKey = ValueKeys.catalogList;
