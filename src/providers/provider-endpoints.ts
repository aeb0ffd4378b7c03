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
 * instead of keeping the old provider's endpoints.
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
import { upstreamClient } from './client-identity.js';
import { discoverUpstreamAuth, OFFLINE_ACCESS, type UpstreamAuthMetadata } from './upstream-discovery.js';

/**
 * Endpoints plus how to call them: discovered endpoints come from a backend's say-so, so
 * requests to them go through the SSRF guard (https only outside loopback, no private
 * ranges, no redirects).
 */
export type ResolvedProvider = ProviderEndpoints & { request?: ProviderRequestOptions };
export type EndpointResolver = (backend: BackendConfig) => Promise<ResolvedProvider>;

/** `cipher` seals client secrets a registration returns (the app's token cipher, state/secrets.ts). */
export function createEndpointResolver(config: Config, store: StateStore, cipher: TokenCipher, log?: { info(obj: object, msg: string): void }): EndpointResolver {
  const discovered = new Map<string, Promise<ResolvedProvider>>();
  // Loopback backends are allowed in discovery only when the gateway itself is local.
  const allowLoopback = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/.test(config.publicUrl);
  const deps = { store, cipher, publicUrl: config.publicUrl, allowLoopback };

  return (backend) => {
    const upstream = backend.upstreamAuth!;
    // Configured endpoints, or a preset's with its quirks (a rejection, never a throw).
    if (!upstream.discover) return Promise.resolve(upstream).then(configuredEndpoints);
    const key = discoveryKey(backend);
    let pending = discovered.get(key);
    if (!pending) {
      pending = (async () => {
        const challenge = await backendChallenge(backend.url!, { allowLoopback });
        const found = await discoverUpstreamAuth(backend.url!, challenge, { allowLoopback });
        const client = await upstreamClient(deps, upstream, found, callbackUri(config.publicUrl, upstream.provider), backend.name);
        log?.info({ provider: upstream.provider, foundBy: found.foundBy, client: client.source, tokenEndpointAuthMethod: client.tokenEndpointAuthMethod }, 'authorization server discovered');
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
          request: { fetch: guardedFetch({ allowLoopback }) },
        };
      })();
      for (const old of discovered.keys()) if (old.startsWith(`${backend.name}\n`)) discovered.delete(old);
      discovered.set(key, pending);
      pending.catch(() => discovered.delete(key));
    }
    return pending;
  };
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
