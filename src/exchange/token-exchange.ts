/**
 * The one question for a backend with `tokenExchange` (SPEC §8): which `Authorization`
 * does it get for this user? A token exchanged for the user's own (exchange-grant.ts),
 * taken from the shared cache while it lasts (exchange-cache.ts), exchanged once at a time
 * per user and target across replicas (one-exchange.ts), and on this replica once for all
 * requests that want it at the same moment. Every call reads the shared cache (one store
 * round trip) rather than a copy in memory: so every replica sends the newest token, and the
 * one a backend refuses is always replaced by a token exchanged after the refusal.
 *
 * A failure becomes a BackendError (failure `token_exchange`) that names the backend and
 * says whether signing in again could help — `error.data` carries `exchange` (the outcome)
 * and `signInAgain` — and is counted in `switchboard_token_exchanges_total{backend,outcome}`
 * and logged, never with a token.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { BackendCaller } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import type { BackendConfig, Config } from '../config/schema.js';
import { createTokenCipher, type TokenCipher } from '../state/secrets.js';
import type { Metrics } from '../ops/metrics.js';
import type { StateStore } from '../state/store.js';
import { ExchangeCache } from './exchange-cache.js';
import { ExchangeEndpoints } from './exchange-endpoint.js';
import { ExchangeFailedError, exchangeToken, type ExchangedToken, type ExchangeFailure } from './exchange-grant.js';
import { oneExchange } from './one-exchange.js';

/** An exchange request waits at most this long (less when the backend's own timeout is shorter). */
const MAX_EXCHANGE_TIMEOUT_MS = 10_000;
const LOCK_TTL_MS = 30_000;

/** Who the token is for: the user (its opaque key), their own token when a request carries one, and where to log. */
export type ExchangeCaller = Pick<BackendCaller, 'principal' | 'subjectToken' | 'log'>;

export interface TokenExchangeDeps {
  store: StateStore;
  cipher: TokenCipher;
  metrics: Metrics;
  /** `auth.issuer`: its metadata names the default token endpoint. */
  issuer: string;
}

export class TokenExchange {
  readonly #deps: TokenExchangeDeps;
  readonly #cache: ExchangeCache;
  readonly #endpoints: ExchangeEndpoints;
  /** By the settings object itself, so that a reload's new settings (a new object) get their own digest. */
  readonly #targets = new WeakMap<object, string>();
  readonly #inflight = new Map<string, Promise<string>>();

  constructor(deps: TokenExchangeDeps) {
    this.#deps = deps;
    this.#cache = new ExchangeCache(deps.store, deps.cipher);
    this.#endpoints = new ExchangeEndpoints(deps.issuer);
  }

  /**
   * `Bearer …` for `backend` on behalf of the caller; undefined when nothing is cached and
   * the caller has no token to exchange (a path without a client request). With `rejected`
   * (the header the backend just refused), never that token again: a fresh exchange.
   * Throws a BackendError when no token can be had.
   */
  async authorizationFor(caller: ExchangeCaller, backend: BackendConfig, options: { rejected?: string } = {}): Promise<string | undefined> {
    const key = this.#cache.key(caller.principal.userKey, this.#target(backend));
    const rejected = options.rejected?.replace(/^Bearer /i, '');
    try {
      if (rejected === undefined) {
        const cached = await this.#cache.get(key);
        if (cached) return `Bearer ${cached.accessToken}`;
      }
      if (!caller.subjectToken) return undefined;
      const timeoutMs = Math.min(MAX_EXCHANGE_TIMEOUT_MS, backend.timeout);
      const run = () =>
        oneExchange(this.#deps.store, this.#cache, key, () => this.#exchange(caller, backend, timeoutMs), { rejected, waitMs: timeoutMs + 5_000, lockTtlMs: LOCK_TTL_MS });
      return `Bearer ${rejected === undefined ? await this.#shared(key, run) : await run()}`;
    } catch (err) {
      throw failureFor(backend.name, err);
    }
  }

  /** One exchange at the authorization server, counted and logged (without tokens). */
  async #exchange(caller: ExchangeCaller, backend: BackendConfig, timeoutMs: number): Promise<ExchangedToken> {
    const x = backend.tokenExchange!;
    const count = (outcome: string) => this.#deps.metrics.tokenExchanges.inc({ backend: backend.name, outcome });
    try {
      const endpoint = await this.#endpoints.of(x).catch((err: Error) => {
        throw new ExchangeFailedError(err.message, { outcome: 'unavailable', signInAgain: false });
      });
      const token = await exchangeToken(endpoint, x, caller.subjectToken!.reveal(), timeoutMs);
      count('ok');
      caller.log.debug({ backend: backend.name }, 'token exchanged for the backend');
      return token;
    } catch (err) {
      const failure = err instanceof ExchangeFailedError ? err.failure : undefined;
      count(failure?.outcome ?? 'unavailable');
      caller.log.warn({ backend: backend.name, outcome: failure?.outcome, oauthError: failure?.oauthError, err: (err as Error).message }, 'token exchange failed');
      throw err;
    }
  }

  /** Requests on this replica that want the same token at the same moment share one attempt. */
  #shared(key: string, run: () => Promise<string>): Promise<string> {
    let pending = this.#inflight.get(key);
    if (!pending) {
      pending = run().finally(() => this.#inflight.delete(key));
      this.#inflight.set(key, pending);
    }
    return pending;
  }

  /**
   * What a token is cached under besides the user: a digest of what the exchange asks for,
   * so backends with the same target share tokens and a changed configuration starts afresh.
   */
  #target(backend: BackendConfig): string {
    const x = backend.tokenExchange!;
    let target = this.#targets.get(x);
    if (!target) {
      const what = [x.tokenUrl ?? '', x.clientId, x.audience ?? '', x.resource ?? '', x.scopes.join(' '), x.preset ?? ''];
      target = createHash('sha256').update(JSON.stringify(what)).digest('base64url').slice(0, 22);
      this.#targets.set(x, target);
    }
    return target;
  }
}

/**
 * The exchange for backends with `tokenExchange`. Made even when none has it yet: a config
 * reload may add one (docs/operations-reload.md); unused, it holds nothing.
 */
export function createTokenExchange(config: Config, store: StateStore, metrics: Metrics): TokenExchange {
  // Without a configured key (one replica, no Redis: the schema insists otherwise), the
  // cache simply ends with the process.
  const key = config.secrets.tokenKey ?? randomBytes(32).toString('base64url');
  return new TokenExchange({ store, cipher: createTokenCipher(key), metrics, issuer: config.auth.issuer });
}

/** The client's error for a failed exchange: names the backend, and says whether signing in again could help. */
function failureFor(backend: string, err: unknown): BackendError {
  if (err instanceof BackendError) return err;
  const failure: ExchangeFailure =
    err instanceof ExchangeFailedError ? err.failure : { outcome: 'unavailable', signInAgain: false };
  const cause = err instanceof ExchangeFailedError ? err.message : `the gateway's state store is unavailable (${(err as Error).message})`;
  const advice = failure.signInAgain
    ? 'signing in again may help: the identity provider no longer exchanges this user\'s token'
    : failure.outcome === 'refused'
      ? 'signing in again will not help: the gateway\'s exchange settings for this backend were refused'
      : 'signing in again will not help; retry later';
  return new BackendError(backend, 'token_exchange', `backend "${backend}": no token could be obtained for it by token exchange (${cause}); ${advice}`, undefined, {
    exchange: failure.outcome,
    signInAgain: failure.signInAgain,
  });
}
