/**
 * Which MCP era each backend speaks (issue 15, "Talking to 2026-07-28 backends"; SPEC §8
 * `backends[].protocol`), found once and shared.
 *
 * The era is a property of the server, not of a request, and a client SHOULD cache it for the
 * origin and re-probe when the cached assumption fails (basic/versioning §Backward
 * Compatibility with Initialization-Based Versions). So a backend is probed (era-probe.ts) at
 * most once per {@link DEFAULT_TTL_MS} for the whole deployment: the answer is kept in memory on
 * this replica and in the shared store, where the other replicas find it instead of probing;
 * callers on one replica that ask at the same time share one probe. A backend whose
 * `protocol` is pinned in the config is never probed. {@link BackendEras.forget} drops what is
 * known when a call shows it wrong (a stateless call answered -32022, or a 400 as a legacy
 * server answers it: the backend was downgraded), so the next call probes again.
 *
 * A probe that decides nothing (401/403, an outage) decides no era: the caller asks again on
 * the next call. What a token-less 401/403 says is kept, though ({@link BackendEras.challenges}):
 * the backend wants its users' tokens before it says anything, so a user's `initialize` without
 * one is answered 401 at once instead of being sent plain to a server that may be of 2026-07-28
 * (issue 42 cause 1). And the era then found with a user's token depended on that token: it is
 * remembered for that user only, in memory and in the store, until the same TTL.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { BackendConfig } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import { ValueKeys } from '../state/value-keys.js';
import type { BackendCaller, McpBackend } from './backend.js';
import { probeEra, type BackendEra, type BackendEraInfo } from './era-probe.js';

export type { BackendEra, BackendEraInfo } from './era-probe.js';

/** How long a found era holds before the backend is probed again (also the store entry's TTL). */
export const DEFAULT_TTL_MS = 10 * 60_000;
/** The longest a probe may take (a backend's shorter `timeout` wins): it holds up the call that asked. */
export const DEFAULT_PROBE_TIMEOUT_MS = 10_000;
const GATEWAY_CLIENT_INFO = { name: 'switchboard', version: '0.1.0' };

export interface BackendErasOptions {
  ttlMs?: number;
  probeTimeoutMs?: number;
  /** `io.modelcontextprotocol/clientInfo` of the probe. */
  clientInfo?: { name: string; version: string };
  /** The clock (tests move it to see an era expire). */
  now?: () => number;
}

interface Known {
  info: BackendEraInfo;
  expiresAt: number;
}

/**
 * What asking for a backend's era gives: the era; {@link EraRefused} when the backend refused the
 * caller's own authorization (401/403 to a probe that carried it: the token, not the backend, is
 * at fault); undefined when nothing was decided.
 */
export type EraAnswer = BackendEraInfo | EraRefused | undefined;

/** The answer when the backend refused the caller's authorization: no era, `refused`. */
export interface EraRefused {
  era?: undefined;
  discover?: undefined;
  refused: true;
}

const REFUSED: EraRefused = Object.freeze({ refused: true as const });

interface Probe {
  promise: Promise<EraAnswer>;
  authorization?: string;
}

/** What the shared store holds per backend: the era, the DiscoverResult, and when it was probed. */
interface Stored extends BackendEraInfo {
  probedAt: number;
}

export class BackendEras {
  readonly #store: StateStore;
  readonly #log: FastifyBaseLogger;
  readonly #ttlMs: number;
  readonly #probeTimeoutMs: number;
  readonly #clientInfo: { name: string; version: string };
  readonly #now: () => number;
  /** By backend name, or `name:user:<userKey>` for an era found with that user's token. */
  readonly #known = new Map<string, Known>();
  /** Backends whose token-less probe was refused (401/403), until when. */
  readonly #challenged = new Map<string, number>();
  readonly #probes = new Map<string, Probe>();
  /** Bumped by forget(): a probe started before it must not bring back what it dropped. */
  readonly #generations = new Map<string, number>();

  constructor(store: StateStore, log: FastifyBaseLogger, options: BackendErasOptions = {}) {
    this.#store = store;
    this.#log = log;
    this.#ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
    this.#probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
    this.#clientInfo = options.clientInfo ?? GATEWAY_CLIENT_INFO;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The backend's era: pinned by its config, known on this replica, known in the shared store,
   * or probed now. Refused ({@link EraRefused}) when the backend answered 401/403 to the
   * caller's `authorization`; undefined when the probe decided nothing (401/403 without one, an
   * outage). Neither is remembered: ask again later. `authorization` is the
   * user's token for a backend behind its users' OAuth; the era found with it holds for all.
   * `caller` goes with the probe to decorators that need it (token exchange exchanges the
   * caller's token for the backend's).
   */
  async eraOf(backend: McpBackend, authorization?: string, caller?: BackendCaller): Promise<EraAnswer> {
    const known = this.knownEra(backend, authorization === undefined ? undefined : caller?.principal.userKey);
    if (known) return known;
    const running = this.#probes.get(backend.name);
    if (running) {
      const info = await running.promise;
      // A shared probe that was refused with other credentials (or none) says nothing about this caller's.
      if (info?.era || running.authorization === authorization) return info;
    }
    return this.#start(backend, authorization, caller);
  }

  /** The era when it is pinned or known on this replica, without asking anyone (undefined: not known here). */
  knownEra(backend: McpBackend, userKey?: string): BackendEraInfo | undefined {
    const pinned = pinnedEra(backend.config);
    if (pinned) return { era: pinned };
    const known = this.#known.get(backend.name) ?? (userKey === undefined ? undefined : this.#known.get(userScope(backend.name, userKey)));
    return known && known.expiresAt > this.#now() ? known.info : undefined;
  }

  /** True when the backend refused a token-less probe (401/403) within the TTL: it speaks only to its users' tokens. */
  challenges(backend: McpBackend): boolean {
    return (this.#challenged.get(backend.name) ?? 0) > this.#now();
  }

  /** Drops what is known of the backend's era, here and in the shared store (the user's own record too, given `userKey`): the next call probes. */
  forget(name: string, userKey?: string): void {
    if (userKey !== undefined) this.#store.deleteValue(ValueKeys.backendEra(userScope(name, userKey))).catch(() => false);
    for (const key of [...this.#known.keys()]) if (key === name || key.startsWith(userScope(name, ''))) this.#known.delete(key);
    this.#challenged.delete(name);
    this.#probes.delete(name);
    this.#generations.set(name, (this.#generations.get(name) ?? 0) + 1);
    this.#store.deleteValue(ValueKeys.backendEra(name)).catch((err: Error) => {
      this.#log.warn({ backend: name, err: err.message }, 'could not drop the shared record of a backend\'s era; it expires by itself');
    });
  }

  #start(backend: McpBackend, authorization: string | undefined, caller: BackendCaller | undefined): Promise<EraAnswer> {
    const probe: Probe = { promise: this.#find(backend, authorization, caller, this.#generations.get(backend.name) ?? 0), authorization };
    this.#probes.set(backend.name, probe);
    const done = () => {
      if (this.#probes.get(backend.name) === probe) this.#probes.delete(backend.name);
    };
    probe.promise.then(done, done);
    return probe.promise;
  }

  async #find(backend: McpBackend, authorization: string | undefined, caller: BackendCaller | undefined, generation: number): Promise<EraAnswer> {
    const { name } = backend;
    const userKey = authorization === undefined ? undefined : caller?.principal.userKey;
    for (const key of userKey === undefined ? [name] : [name, userScope(name, userKey)]) {
      const shared = await this.#readShared(key);
      if (!shared) continue;
      this.#remember(name, key, shared, generation);
      return infoOf(shared);
    }
    const outcome = await probeEra(backend, {
      authorization,
      caller,
      timeoutMs: Math.min(this.#probeTimeoutMs, backend.config.timeout || this.#probeTimeoutMs),
      clientInfo: this.#clientInfo,
    });
    if (!outcome.decided) {
      this.#log.debug({ backend: name, why: outcome.why }, 'backend era not known yet; asking again on the next call');
      if (outcome.refused && authorization === undefined && (this.#generations.get(name) ?? 0) === generation) this.#challenged.set(name, this.#now() + this.#ttlMs);
      return outcome.refused && authorization !== undefined ? REFUSED : undefined;
    }
    // Found with a token the backend wants before it answers: that user's answer, not everyone's.
    const key = userKey !== undefined && this.challenges(backend) ? userScope(name, userKey) : name;
    this.#log.info({ backend: name, era: outcome.decided.era, why: outcome.why, perUser: key !== name }, 'backend era found');
    const stored: Stored = { ...outcome.decided, probedAt: this.#now() };
    if (this.#remember(name, key, stored, generation)) await this.#writeShared(key, stored);
    return outcome.decided;
  }

  /** Keeps what was found (under `key`) unless forget() ran since the probe started; true when kept. */
  #remember(name: string, key: string, stored: Stored, generation: number): boolean {
    if ((this.#generations.get(name) ?? 0) !== generation) return false;
    this.#known.set(key, { info: infoOf(stored), expiresAt: stored.probedAt + this.#ttlMs });
    return true;
  }

  async #readShared(name: string): Promise<Stored | undefined> {
    try {
      const stored = parseStored(await this.#store.getValue(ValueKeys.backendEra(name)));
      return stored && stored.probedAt + this.#ttlMs > this.#now() ? stored : undefined;
    } catch (err) {
      this.#log.warn({ backend: name, err: (err as Error).message }, 'could not read the shared record of a backend\'s era; probing it');
      return undefined;
    }
  }

  async #writeShared(name: string, stored: Stored): Promise<void> {
    try {
      await this.#store.putValue(ValueKeys.backendEra(name), JSON.stringify(stored), this.#ttlMs);
    } catch (err) {
      this.#log.warn({ backend: name, err: (err as Error).message }, 'could not share a backend\'s era with the other replicas; they probe it themselves');
    }
  }
}

/**
 * The era the config decides without a probe: `protocol` pinned, or a backend the gateway
 * reaches through its local bridge (stdio, legacy SSE), which speaks only the
 * `initialize`-based revisions, or one without a URL of its own (a gateway-made backend).
 */
function pinnedEra(config: BackendConfig): BackendEra | undefined {
  if (config.protocol && config.protocol !== 'auto') return config.protocol;
  if (config.transport !== 'streamable-http' || !config.url) return '2025-11-25';
  return undefined;
}

/** Where an era found with a user's token is kept (memory and the store's `era:` key). */
function userScope(name: string, userKey: string): string {
  return `${name}:user:${userKey}`;
}

function infoOf(stored: Stored): BackendEraInfo {
  return stored.discover ? { era: stored.era, discover: stored.discover } : { era: stored.era };
}

/** The store's record, checked: another version of the gateway may have written it. */
function parseStored(text: string | undefined): Stored | undefined {
  if (!text) return undefined;
  try {
    const value = JSON.parse(text) as Partial<Stored>;
    if (value.era !== '2026-07-28' && value.era !== '2025-11-25') return undefined;
    if (typeof value.probedAt !== 'number') return undefined;
    const discover = value.discover;
    if (discover !== undefined && (typeof discover !== 'object' || discover === null || Array.isArray(discover))) return undefined;
    return { era: value.era, probedAt: value.probedAt, ...(discover ? { discover } : {}) };
  } catch {
    return undefined;
  }
}
