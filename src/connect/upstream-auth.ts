/**
 * Third-party authorization for backends with `upstreamAuth` (SPEC §4 steps 1, 2 and 5).
 * Before a message goes to such a backend, the user's token for its provider is taken from
 * the vault (refreshed when near expiry, one refresh at a time across replicas). With no
 * usable token — none, refresh refused, or the backend said 401 — an elicitation is started
 * and the client is told where the user can link the account.
 *
 * The client's own token never goes to the backend, and the third-party token never goes to
 * the client: it only ever travels in the Authorization header towards the backend.
 */
import type { Principal } from '../auth/principal.js';
import type { BackendConfig } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import type { StateStore } from '../state/store.js';
import type { Elicitation, ElicitationStore } from './elicitations.js';
import { sameIssuer, type EndpointResolver } from '../providers/provider-endpoints.js';
import type { ProviderTokens } from '../providers/provider-client.js';
import type { TokenVault } from './token-vault.js';
import { usableToken } from './usable-token.js';
import { ProviderError } from '../providers/provider-client.js';
import { BackendError } from '../backends/errors.js';
import { bindDpop, dpopKey, dpopKeyFor } from '../backends/dpop.js';
import { challengeScopes, insufficientScope, splitScopes } from '../providers/www-authenticate.js';

export type UpstreamDecision = { authorization: string } | { elicitation: Elicitation };

/**
 * What a backend's 403 `insufficient_scope` to the user's token leads to: a step-up link
 * asking for more, or — when it asks for nothing the token lacks — nothing a link could
 * change (`wanted`: the challenge's scopes; `granted`: the token's).
 */
export type StepUp = { elicitation: Elicitation } | { hopeless: { wanted: string[]; granted: string[] } };

export interface UpstreamAuthDeps {
  store: StateStore;
  vault: TokenVault;
  elicitations: ElicitationStore;
  metrics: Metrics;
  /** Provider endpoints for a backend (configured, or discovered from the backend, following its moves). */
  endpoints: EndpointResolver;
  log: { warn(obj: object, msg: string): void };
}

export class UpstreamAuth {
  constructor(private readonly deps: UpstreamAuthDeps) {}

  /**
   * The one rule for "does this user have a token for this backend": the Authorization
   * header to send, or undefined when no usable token is stored. Starts nothing: an
   * elicitation is made only where a client is about to be shown it ({@link elicit}), so
   * that messages owing the client no answer (notifications, the GET stream, DELETE) leave
   * no orphan records behind. Throws a ProviderError when a due refresh cannot be done now.
   */
  async linkedAuthorization(principal: Pick<Principal, 'userKey'>, backend: BackendConfig): Promise<string | undefined> {
    const upstream = backend.upstreamAuth!;
    // Asked only when a stored token must be refreshed: a user with no token needs no
    // provider to connect or list ("connecting needs no account"), so discovery waits for the link.
    // A refresh token goes only to the server that issued it (issue 42 §6): one the backend
    // no longer names answers as a refused grant would, and the link is made anew.
    const endpoints = async (stored: ProviderTokens) => {
      const found = await this.#endpoints(backend, stored.issuer);
      if (stored.issuer && upstream.discover && !sameIssuer(found.issuer, stored.issuer)) {
        throw new ProviderError('oauth', `the ${upstream.provider} link was made at an authorization server the backend no longer names`, 'invalid_grant');
      }
      return found;
    };
    const tokens = await usableToken(
      {
        vault: this.deps.vault,
        store: this.deps.store,
        log: this.deps.log,
        onRefresh: (outcome) => this.deps.metrics.tokenRefreshes.inc({ provider: upstream.provider, outcome }),
      },
      principal.userKey,
      upstream.provider,
      endpoints,
    );
    if (!tokens || !(await this.#madeAtCurrentServer(principal, backend, tokens))) return undefined;
    return authorizationOf(tokens);
  }

  /** The endpoints, `issuer`'s when this replica holds an older discovery; a failed discovery is the provider's failure. */
  #endpoints(backend: BackendConfig, issuer: string | undefined) {
    return (issuer ? this.deps.endpoints.current(backend, issuer) : this.deps.endpoints(backend)).catch((err: Error) => {
      // Discovery failed (the backend or its authorization server is away): the provider
      // side is unavailable, which is a backend failure, not the gateway's state.
      throw new ProviderError('network', `the ${backend.upstreamAuth!.provider} authorization server could not be discovered (${err.message})`);
    });
  }

  /**
   * Whether a link may go to its backend (issue 42 §6, SEP-2352): yes unless the link records
   * an issuer and the backend's authorization server, as this replica knows it, is another —
   * then known once more (this replica may be the stale one) before the link is dropped and
   * the user asked to link again. Nothing is fetched while this replica has not discovered
   * the backend: a user with a token needs no discovery, and the backend's 401 says the rest.
   */
  async #madeAtCurrentServer(principal: Pick<Principal, 'userKey'>, backend: BackendConfig, tokens: ProviderTokens): Promise<boolean> {
    const known = backend.upstreamAuth!.discover && tokens.issuer ? this.deps.endpoints.knownIssuer(backend) : undefined;
    if (known === undefined || sameIssuer(known, tokens.issuer)) return true;
    if (sameIssuer((await this.#endpoints(backend, tokens.issuer)).issuer, tokens.issuer)) return true;
    const provider = backend.upstreamAuth!.provider;
    this.deps.log.warn({ provider }, 'the linked account was made at an authorization server the backend no longer names; asking the user to link again');
    const now = await this.deps.vault.get(principal.userKey, provider);
    if (now?.accessToken === tokens.accessToken) await this.deps.vault.delete(principal.userKey, provider);
    return false;
  }

  /** The Authorization header for this user at this backend, or the elicitation that must happen first. */
  async authorize(principal: Principal, backend: BackendConfig, mcpSessionId: string | undefined): Promise<UpstreamDecision> {
    const authorization = await this.linkedAuthorization(principal, backend);
    if (authorization) return { authorization };
    return { elicitation: await this.elicit(principal, backend, mcpSessionId) };
  }

  /** Told of every link requirement (the audit trail, issue 30 §2); set by the wiring when the audit is on. */
  onElicit?: (principal: Principal, backend: string, mcpSessionId: string | undefined, stepUp: boolean) => void;

  /**
   * Starts the elicitation a client is about to be shown (SPEC §4 step 2); `scopes` for a
   * step-up link. It names the authorization server this replica knows for the backend, so
   * that the replica the browser reaches links there (issue 42 §6).
   */
  async elicit(principal: Principal, backend: BackendConfig, mcpSessionId: string | undefined, scopes?: string[]): Promise<Elicitation> {
    const provider = backend.upstreamAuth!.provider;
    this.onElicit?.(principal, backend.name, mcpSessionId, scopes !== undefined);
    const issuer = backend.upstreamAuth!.discover ? this.deps.endpoints.knownIssuer(backend) : undefined;
    const elicitation = await this.deps.elicitations.create(principal, { mcpSessionId, backend: backend.name, provider, ...(scopes ? { scopes } : {}), ...(issuer ? { issuer } : {}) });
    this.deps.metrics.elicitations.inc({ provider, event: 'started' });
    return elicitation;
  }

  /**
   * The backend answered the user's token with 403 (MCP 2025-11-25 "Authorization", §Step-Up
   * Authorization Flow); `wwwAuthenticate` is its challenge. Undefined when it is not an
   * `insufficient_scope` one (the 403 stays the backend's failure). Else a step-up link for
   * the union of the scopes the token was granted (the vault's record) and those the
   * challenge names — or, when the challenge names none the token lacks, `hopeless`: a new
   * link would ask for the same again, so the retries end here (conformance
   * auth/scope-retry-limit). The stored token stays usable until a new link replaces it.
   */
  async stepUp(principal: Principal, backend: BackendConfig, wwwAuthenticate: string | string[] | undefined, mcpSessionId: string | undefined): Promise<StepUp | undefined> {
    const wanted = insufficientScope(wwwAuthenticate);
    if (!wanted) return undefined;
    const tokens = await this.deps.vault.get(principal.userKey, backend.upstreamAuth!.provider);
    const granted = splitScopes(tokens?.scope);
    if (wanted.every((s) => granted.includes(s))) return { hopeless: { wanted, granted } };
    const scopes = [...new Set([...granted, ...wanted])];
    return { elicitation: await this.elicit(principal, backend, mcpSessionId, scopes) };
  }

  /**
   * The backend refused our token (401): forget it, so that the next message asks again. With
   * `discover`, the backend may have moved to another authorization server (SEP-2352, issue 42
   * §6): its metadata is read again (the challenge's `resource_metadata` when given) and, if
   * it names another, the backend is discovered anew — the next link is made there, with a
   * client registered there. True when it moved.
   */
  async forget(principal: Pick<Principal, 'userKey'>, backend: BackendConfig, wwwAuthenticate?: string | string[]): Promise<boolean> {
    const { provider, discover } = backend.upstreamAuth!;
    const linked = discover ? await this.deps.vault.get(principal.userKey, provider) : undefined;
    await this.deps.vault.delete(principal.userKey, provider);
    if (!discover) return false;
    const challenge = Array.isArray(wwwAuthenticate) ? wwwAuthenticate.join(', ') : wwwAuthenticate;
    const moved = await this.deps.endpoints.moved(backend, challenge, linked?.issuer).catch((err: Error) => {
      this.deps.log.warn({ provider, err: err.message }, 'could not discover the authorization server the backend now names');
      return undefined;
    });
    return moved !== undefined;
  }

  /**
   * The backend answered 401 to what was sent (`sentToken`: with the user's token), with
   * `wwwAuthenticate`: a refused token is forgotten (and a move followed, {@link forget}).
   * The scopes the next link asks for when the refused token lacked some the challenge names
   * (MCP 2025-11-25 "Authorization", §Scope Selection Strategy; issue 42 §8): those and the
   * ones it was granted (SEP-2350), as for a 403 ({@link stepUp}). Undefined otherwise — the
   * backend's usual scopes, which discovery read from the challenge of its first refused
   * request (providers/backend-challenge.ts) and reads again after a move.
   */
  async refused(principal: Pick<Principal, 'userKey'>, backend: BackendConfig, wwwAuthenticate: string | string[] | undefined, sentToken: boolean): Promise<string[] | undefined> {
    if (!sentToken) return undefined;
    const wanted = challengeScopes(wwwAuthenticate);
    const granted = splitScopes((await this.deps.vault.get(principal.userKey, backend.upstreamAuth!.provider))?.scope);
    const moved = await this.forget(principal, backend, wwwAuthenticate);
    if (moved || !wanted?.length || wanted.every((s) => granted.includes(s))) return undefined;
    return [...new Set([...granted, ...wanted])];
  }

  /** The backend refused our token (401): forget it, and ask the user to link the account again. */
  async rejected(principal: Principal, backend: BackendConfig, mcpSessionId: string | undefined): Promise<Elicitation> {
    await this.forget(principal, backend);
    return this.elicit(principal, backend, mcpSessionId);
  }
}

/**
 * The Authorization header of a link's tokens: `DPoP <token>` for a DPoP-bound token (RFC 9449
 * §7.1), bound to the link's key so the backend client proves it on each request
 * (backends/dpop-exchange.ts); else `Bearer <token>`. A DPoP token without a key is unusable.
 */
async function authorizationOf(tokens: ProviderTokens): Promise<string | undefined> {
  if (tokens.tokenType.toLowerCase() !== 'dpop') return `Bearer ${tokens.accessToken}`;
  if (!tokens.dpopKey) return undefined;
  const authorization = `DPoP ${tokens.accessToken}`;
  bindDpop(authorization, dpopKeyFor(authorization) ?? (await dpopKey(tokens.dpopKey)));
  return authorization;
}

/**
 * The JSON-RPC error for a 403 `insufficient_scope` no new link can help (-32010, the
 * backend's failure): which scopes the backend wants, and that the account already granted them.
 */
export function insufficientScopeError(backend: BackendConfig, hopeless: { wanted: string[]; granted: string[] }): BackendError {
  const provider = backend.upstreamAuth!.provider;
  const message = hopeless.wanted.length
    ? `backend "${backend.name}" refused the request for want of scope ${hopeless.wanted.join(' ')}, which the linked ${provider} account already has; linking again would not change that`
    : `backend "${backend.name}" refused the linked ${provider} account for insufficient scope without naming the scope it wants`;
  return new BackendError(backend.name, 'bad_status', message, 403, { error: 'insufficient_scope', requiredScopes: hopeless.wanted, grantedScopes: hopeless.granted });
}
