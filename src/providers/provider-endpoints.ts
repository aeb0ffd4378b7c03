/**
 * Where a backend's third-party provider lives (SPEC §3 `upstreamAuth`): configured
 * endpoints (or a preset's, with that provider's quirks: provider-presets.ts), or — with
 * `discover: true` — found from the backend itself, as an MCP 2025-11-25 client does
 * ("Authorization"): the challenge of its 401 to a token-less request (backend-challenge.ts),
 * its RFC 9728 metadata and its authorization server's RFC 8414 metadata, or the 2025-03-26
 * fallbacks (upstream-discovery.ts); a client identity — configured, a Client ID Metadata
 * Document, or registered (client-identity.ts) — and the scopes to ask for (`offline_access`
 * among them where the authorization server offers it). Discovery runs
 * once per backend and its `url` and `upstreamAuth` settings and is reused; a failure is not.
 * A reload that changes either (issue 32 §1) therefore discovers afresh on the next link
 * instead of keeping the old provider's endpoints. So does a backend whose protected
 * resource metadata names another authorization server when it refuses a token (SEP-2352,
 * issue 42 §6: {@link EndpointResolver.moved}); links made at the old one are then no
 * longer used for it (connect/upstream-auth.ts compares the issuer each link records).
 *
 * Only linking needs it: connecting to a backend and listing what it shows without a token
 * never waits for discovery (connect/upstream-auth.ts resolves it lazily).
 */
import { createHash } from 'node:crypto';
import type { BackendConfig, Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import type { TokenCipher } from '../state/secrets.js';
import type { ProviderEndpoints, ProviderRequestOptions } from './provider-client.js';
import { callbackUri } from './redirect-uri.js';
import { configuredEndpoints } from './provider-presets.js';
import { guardedFetch } from './safe-fetch.js';
import { backendChallenge } from './backend-challenge.js';
import { upstreamClient, type ClientIdentityDeps } from './client-identity.js';
import { currentAuthorizationServer, discoverUpstreamAuth, OFFLINE_ACCESS, trimSlash, type UpstreamAuthMetadata } from './upstream-discovery.js';

/**
 * Endpoints plus how to call them: discovered endpoints come from a backend's say-so, so
 * requests to them go through the SSRF guard (https only outside loopback, no private
 * ranges, no redirects).
 */
export type ResolvedProvider = ProviderEndpoints & { request?: ProviderRequestOptions };

/**
 * A backend's provider endpoints (the call), and — for `discover` — what following an
 * authorization-server migration needs (MCP 2026-07-28, SEP-2352: when the backend's
 * protected resource metadata names a new authorization server, discover again and register
 * there). Each replica holds its own discovery; what links record (the vault's `issuer`,
 * an elicitation's and a pending authorization's) lets a replica notice that its own is older.
 */
export interface EndpointResolver {
  (backend: BackendConfig): Promise<ResolvedProvider>;
  /** The issuer this replica's finished discovery found for the backend; undefined when none has finished (nothing is fetched). */
  knownIssuer(backend: BackendConfig): string | undefined;
  /**
   * The endpoints, discovered once more when the ones held name an issuer other than `issuer`
   * (another replica followed a migration first, or `issuer` is the old server's). The caller
   * compares the answer's `issuer` with its own.
   */
  current(backend: BackendConfig, issuer: string): Promise<ResolvedProvider>;
  /**
   * The backend refused a token issued by `linkedIssuer` (when the link recorded it), with
   * `wwwAuthenticate`: its protected resource metadata is read again and, when it names
   * another authorization server than this replica's discovery found — or, where it has none,
   * than the one that issued the token —, the backend is discovered anew (and a client
   * registered there). The new issuer, else undefined.
   */
  moved(backend: BackendConfig, wwwAuthenticate: string | undefined, linkedIssuer?: string): Promise<string | undefined>;
}

/**
 * A discovery of this replica: in flight, or finished at `at`. `askedFor`: the issuer a link
 * named when this replica's own discovery named another, which made this one.
 */
interface Discovery {
  pending: Promise<ResolvedProvider>;
  settled?: { provider: ResolvedProvider; at: number };
  askedFor?: string;
}

/**
 * A discovery made for links naming one issuer is not repeated for another link naming it
 * this soon ({@link EndpointResolver.current}): a burst of stale links makes one. A link
 * naming an issuer no recent discovery was made for is always checked: a discovery this
 * replica made for its own reasons, however recent, may be the stale one (the backend moved,
 * and another replica noticed first).
 */
const REDISCOVER_AFTER_MS = 1_000;

/** `cipher` seals client secrets a registration returns (the app's token cipher, state/secrets.ts). */
export function createEndpointResolver(config: Config, store: StateStore, cipher: TokenCipher, log?: { info(obj: object, msg: string): void }): EndpointResolver {
  const discoveries = new Map<string, Discovery>();
  // Loopback backends are allowed in discovery only when the gateway itself is local.
  const allowLoopback = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/.test(config.publicUrl);
  const deps = { store, cipher, publicUrl: config.publicUrl, allowLoopback };

  const discover = (backend: BackendConfig, askedFor?: string): Discovery => {
    const key = discoveryKey(backend);
    const entry: Discovery = { pending: discoverProvider(deps, config.publicUrl, backend, log), ...(askedFor ? { askedFor } : {}) };
    for (const old of discoveries.keys()) if (old.startsWith(`${backend.name}\n`)) discoveries.delete(old);
    discoveries.set(key, entry);
    entry.pending.then(
      (provider) => void (entry.settled = { provider, at: Date.now() }),
      () => discoveries.get(key) === entry && discoveries.delete(key),
    );
    return entry;
  };
  const held = (backend: BackendConfig) => (backend.upstreamAuth?.discover ? discoveries.get(discoveryKey(backend)) : undefined);
  const resolve = (backend: BackendConfig): Promise<ResolvedProvider> => {
    const upstream = backend.upstreamAuth!;
    // Configured endpoints, or a preset's with its quirks (a rejection, never a throw).
    if (!upstream.discover) return Promise.resolve(upstream).then(configuredEndpoints);
    return (held(backend) ?? discover(backend)).pending;
  };
  /**
   * Discovery again, unless one is in flight, or — for a link naming `askedFor` — one made
   * for links naming it has just finished. Without `askedFor` (a refused token), always.
   */
  const again = (backend: BackendConfig, askedFor?: string): Promise<ResolvedProvider> => {
    const entry = held(backend);
    if (entry && !entry.settled) return entry.pending;
    const recent = entry?.settled && Date.now() - entry.settled.at < REDISCOVER_AFTER_MS;
    if (recent && askedFor !== undefined && entry.askedFor !== undefined && sameIssuer(entry.askedFor, askedFor)) return entry.pending;
    return discover(backend, askedFor).pending;
  };

  return Object.assign(resolve, {
    knownIssuer: (backend: BackendConfig) => held(backend)?.settled?.provider.issuer,
    async current(backend: BackendConfig, issuer: string): Promise<ResolvedProvider> {
      const provider = await resolve(backend);
      if (!backend.upstreamAuth!.discover || sameIssuer(provider.issuer, issuer)) return provider;
      return again(backend, issuer);
    },
    async moved(backend: BackendConfig, wwwAuthenticate: string | undefined, linkedIssuer?: string): Promise<string | undefined> {
      const known = held(backend)?.settled?.provider.issuer ?? linkedIssuer;
      if (known === undefined) return undefined; // nothing to compare with: the next discovery finds what is current
      const now = await currentAuthorizationServer(backend.url!, wwwAuthenticate, { allowLoopback }).catch(() => undefined);
      if (now === undefined || sameIssuer(now, known)) return undefined;
      log?.info({ provider: backend.upstreamAuth!.provider, from: known, to: now }, 'the backend names another authorization server; discovering it');
      return (await again(backend)).issuer;
    },
  });
}

/** Discovery proper: the challenge, the metadata, a client at the server found, the scopes to ask for. */
async function discoverProvider(deps: ClientIdentityDeps, publicUrl: string, backend: BackendConfig, log?: { info(obj: object, msg: string): void }): Promise<ResolvedProvider> {
  const upstream = backend.upstreamAuth!;
  const allowLoopback = deps.allowLoopback;
  const challenge = await backendChallenge(backend.url!, { allowLoopback });
  const found = await discoverUpstreamAuth(backend.url!, challenge, { allowLoopback });
  const client = await upstreamClient(deps, upstream, found, callbackUri(publicUrl, upstream.provider), backend.name);
  log?.info({ provider: upstream.provider, foundBy: found.foundBy, issuer: found.authorizationServer, client: client.source, tokenEndpointAuthMethod: client.tokenEndpointAuthMethod, dpop: found.dpop !== undefined }, 'authorization server discovered');
  const resource = upstream.resource ?? found.resource;
  return {
    authorizationUrl: found.authorizationUrl,
    tokenUrl: found.tokenUrl,
    revocationUrl: found.revocationUrl,
    clientId: client.clientId,
    clientSecret: client.clientSecret,
    tokenEndpointAuthMethod: client.tokenEndpointAuthMethod,
    scopes: withOfflineAccess(upstream.scopes.length ? upstream.scopes : requestedScopes(found), found),
    ...(resource ? { resource } : {}),
    // RFC 9207: what the callback compares the authorization response's `iss` with.
    issuer: found.authorizationServer,
    ...(found.issParameterSupported ? { requireIssParameter: true } : {}),
    // RFC 9449: a link at this server holds a key and proves it (connect/oauth-callback.ts).
    ...(found.dpop ? { dpop: found.dpop } : {}),
    request: { fetch: guardedFetch({ allowLoopback }) },
  };
}

/** Issuer identifiers compared as RFC 8414 §3.3 allows for a trailing slash; an unknown one matches nothing. */
export function sameIssuer(a: string | undefined, b: string | undefined): boolean {
  return a !== undefined && b !== undefined && trimSlash(a) === trimSlash(b);
}

/**
 * The backend's name with a digest of what discovery is made from (its url and
 * `upstreamAuth`): a backend whose settings a reload changed misses the cache. The name
 * comes first, so the entry of its earlier settings can be dropped when a new one is made.
 */
function discoveryKey(backend: BackendConfig): string {
  const digest = createHash('sha256').update(JSON.stringify([backend.url, backend.upstreamAuth])).digest('base64url');
  return `${backend.name}\n${digest}`;
}

/**
 * MCP 2025-11-25 "Authorization", §Scope Selection Strategy: the `scope` of the backend's
 * challenge, else the PRM's `scopes_supported`, else none (the `scope` parameter is left out).
 */
export function requestedScopes(found: Pick<UpstreamAuthMetadata, 'challengeScopes' | 'scopesSupported'>): string[] {
  return found.challengeScopes ?? found.scopesSupported ?? [];
}

/**
 * `scopes` with `offline_access` added where the authorization server lists it in its own
 * `scopes_supported`, so the link gets a refresh token and outlives the access token (MCP
 * SEP-2207); never where it does not (such a server may refuse the unknown scope). As the v2
 * SDK's client does, only to a request that names scopes: added to none, it would replace the
 * server's default scope with `offline_access` alone.
 */
export function withOfflineAccess(scopes: string[], found: Pick<UpstreamAuthMetadata, 'offlineAccess'>): string[] {
  if (!found.offlineAccess || !scopes.some((s) => s !== '') || scopes.includes(OFFLINE_ACCESS)) return scopes;
  return [...scopes, OFFLINE_ACCESS];
}
