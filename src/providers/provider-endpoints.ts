/**
 * Where a backend's third-party provider lives (SPEC §3 `upstreamAuth`): configured
 * endpoints (or a preset's, with that provider's quirks: provider-presets.ts), or — with
 * `discover: true` — found from the backend itself (MCP 2025-11-25 "Authorization": its
 * 401 and RFC 9728 metadata name the authorization server, whose RFC 8414 metadata names
 * the endpoints), with a client registered dynamically (RFC 7591) when none is
 * configured. Discovery runs once per backend and is reused; a failure is not.
 */
import type { BackendConfig, Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import type { ProviderEndpoints, ProviderRequestOptions } from './provider-client.js';
import { callbackUri } from './redirect-uri.js';
import { configuredEndpoints } from './provider-presets.js';
import { guardedFetch } from './safe-fetch.js';
import { registeredClient } from './client-registration.js';
import { discoverUpstreamAuth } from './upstream-discovery.js';

/**
 * Endpoints plus how to call them: discovered endpoints come from a backend's say-so, so
 * requests to them go through the SSRF guard (https only outside loopback, no private
 * ranges, no redirects).
 */
export type ResolvedProvider = ProviderEndpoints & { request?: ProviderRequestOptions };
export type EndpointResolver = (backend: BackendConfig) => Promise<ResolvedProvider>;

export function createEndpointResolver(config: Config, store: StateStore): EndpointResolver {
  const discovered = new Map<string, Promise<ResolvedProvider>>();
  // Loopback backends are allowed in discovery only when the gateway itself is local.
  const allowLoopback = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/.test(config.publicUrl);

  return (backend) => {
    const upstream = backend.upstreamAuth!;
    // Configured endpoints, or a preset's with its quirks (a rejection, never a throw).
    if (!upstream.discover) return Promise.resolve(upstream).then(configuredEndpoints);
    let pending = discovered.get(backend.name);
    if (!pending) {
      pending = (async () => {
        const found = await discoverUpstreamAuth(backend.url!, undefined, { allowLoopback });
        const client = upstream.clientId
          ? { clientId: upstream.clientId, clientSecret: upstream.clientSecret }
          : await registeredClient(store, upstream.provider, requireRegistration(found.registrationUrl, backend.name), callbackUri(config.publicUrl, upstream.provider), { allowLoopback });
        return {
          authorizationUrl: found.authorizationUrl,
          tokenUrl: found.tokenUrl,
          revocationUrl: found.revocationUrl,
          clientId: client.clientId,
          clientSecret: client.clientSecret,
          scopes: upstream.scopes.length ? upstream.scopes : (found.scopesSupported ?? []),
          resource: upstream.resource ?? found.resource,
          // RFC 9207: what the callback compares the authorization response's `iss` with.
          issuer: found.authorizationServer,
          ...(found.issParameterSupported ? { requireIssParameter: true } : {}),
          request: { fetch: guardedFetch({ allowLoopback }) },
        };
      })();
      discovered.set(backend.name, pending);
      pending.catch(() => discovered.delete(backend.name));
    }
    return pending;
  };
}

function requireRegistration(url: string | undefined, backend: string): string {
  if (!url) throw new Error(`backend "${backend}": its authorization server offers no dynamic client registration; configure upstreamAuth.clientId`);
  return url;
}
