/**
 * `/connections` (SPEC §2): the signed-in user's linked accounts, one row per provider the
 * configured backends use, with status and expiry.
 *
 * - `POST /connections/{provider}/connect` (CSRF-checked): links an account before any tool
 *   needs it (issue 12): the provider's authorization with PKCE S256 and a single-use `state`
 *   bound to this browser session and user, no elicitation; the callback stores the tokens
 *   and comes back here (oauth-callback.ts).
 * - `POST /connections/{provider}/disconnect` (CSRF-checked): revokes the tokens at the
 *   provider where it supports RFC 7009 and deletes them here either way.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BackendConfig, Config } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import { loginUrl, registerFormParser, type BrowserSessions, type BrowserUser } from '../browser/browser-sessions.js';
import { providerOrPage } from './connect-routes.js';
import { connectionsPage, errorPage, REDIRECT_HEADERS, refusalPage, sendPage, setPageErrorHandler, type ConnectionEntry } from '../browser/pages.js';
import { beginAuthorization } from './pending-authorization.js';
import { revokeToken } from '../providers/provider-client.js';
import type { EndpointResolver } from '../providers/provider-endpoints.js';
import type { TokenVault } from './token-vault.js';

export interface ConnectionsDeps {
  config: Config;
  store: StateStore;
  sessions: BrowserSessions;
  vault: TokenVault;
  endpoints: EndpointResolver;
}

/** How long the page waits for a provider's endpoints (discovery) to name Connect's target. */
const ENDPOINTS_WAIT_MS = 3_000;

type ProviderForm = { Params: { provider: string }; Body: Record<string, string> };

/**
 * One backend per provider: the one whose endpoints link and revoke that provider's tokens.
 * Worked out per request from the live config, so a reload that adds or removes a backend
 * with `upstreamAuth` changes what the page offers (issue 32 §1).
 */
function providersOf(config: Config): Map<string, BackendConfig> {
  const providers = new Map<string, BackendConfig>();
  for (const backend of config.backends) if (backend.upstreamAuth && !providers.has(backend.upstreamAuth.provider)) providers.set(backend.upstreamAuth.provider, backend);
  return providers;
}

export function registerConnectionsRoutes(app: FastifyInstance, deps: ConnectionsDeps): void {

  /** The signed-in user, the provider's backend, after the CSRF check; undefined after answering. */
  async function checkedForm(request: FastifyRequest<ProviderForm>, reply: FastifyReply): Promise<{ user: BrowserUser; backend: BackendConfig } | undefined> {
    const user = await deps.sessions.current(request);
    if (!user) {
      await reply.headers(REDIRECT_HEADERS).redirect(loginUrl('/connections'), 303);
      return undefined;
    }
    if (!deps.sessions.csrfValid(user, request.body?.csrf)) {
      await sendPage(reply, refusalPage({ title: 'Request refused', reason: 'This form has expired or did not come from this site.' }));
      return undefined;
    }
    const backend = providersOf(deps.config).get(request.params.provider);
    if (!backend) {
      await sendPage(reply, errorPage({ status: 404, title: 'Unknown provider', detail: 'No backend uses this provider.' }));
      return undefined;
    }
    return { user, backend };
  }

  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);

    scope.get('/connections', async (request, reply) => {
      const user = await deps.sessions.current(request);
      if (!user) return reply.headers(REDIRECT_HEADERS).redirect(loginUrl('/connections'), 303);
      const providers = providersOf(deps.config);
      const connections = await Promise.all([...providers.keys()].map((provider) => entry(deps.vault, user.userKey, provider)));
      // Connect answers with a 303 to the provider: the page's CSP form-action must allow it.
      const unlinked = connections.filter((c) => c.status !== 'connected').map((c) => providers.get(c.provider)!);
      const formActions = await authorizationOrigins(deps, unlinked, (backend, err) =>
        request.log.warn({ provider: backend.upstreamAuth!.provider, err: err.message }, 'provider endpoints unavailable for Connect'),
      );
      return sendPage(reply, connectionsPage({ accountLabel: user.label, connections, csrfToken: user.csrfToken, formActions }));
    });

    scope.post<ProviderForm>('/connections/:provider/connect', async (request, reply) => {
      const checked = await checkedForm(request, reply);
      if (!checked) return reply;
      const { user, backend } = checked;
      const endpoints = await providerOrPage(deps, request, reply, backend, '/connections');
      if (!endpoints) return reply;
      const provider = backend.upstreamAuth!.provider;
      const location = await beginAuthorization(deps.store, { publicUrl: deps.config.publicUrl, endpoints, user, provider, backend: backend.name });
      return reply.headers(REDIRECT_HEADERS).redirect(location, 303);
    });

    scope.post<ProviderForm>('/connections/:provider/disconnect', async (request, reply) => {
      const checked = await checkedForm(request, reply);
      if (!checked) return reply;
      const { user, backend } = checked;
      const provider = backend.upstreamAuth!.provider;
      const tokens = await deps.vault.get(user.userKey, provider);
      if (tokens) {
        try {
          const endpoints = await deps.endpoints(backend);
          if (tokens.refreshToken) await revokeToken(endpoints, tokens.refreshToken, 'refresh_token', endpoints.request);
          await revokeToken(endpoints, tokens.accessToken, 'access_token', endpoints.request);
        } catch (err) {
          // Deleting here is what matters; the provider may not support revocation or be down.
          request.log.warn({ provider, err: (err as Error).message }, 'token revocation failed; deleting anyway');
        }
        await deps.vault.delete(user.userKey, provider);
      }
      return reply.headers(REDIRECT_HEADERS).redirect('/connections', 303);
    });
  });
}

async function entry(vault: TokenVault, userKey: string, provider: string): Promise<ConnectionEntry> {
  const tokens = await vault.get(userKey, provider);
  if (!tokens) return { provider, status: 'not connected' };
  const expired = tokens.expiresAt !== undefined && tokens.expiresAt <= Date.now() && !tokens.refreshToken;
  return { provider, status: expired ? 'expired' : 'connected', ...(tokens.expiresAt ? { expiresAt: tokens.expiresAt } : {}), ...(tokens.refreshToken ? { refreshes: true } : {}) };
}

/**
 * Origins of the authorization endpoints of `backends`, waiting at most {@link ENDPOINTS_WAIT_MS}
 * for discovery: a provider that cannot be reached now is left out (its Connect then answers
 * with the "cannot reach" page, or is blocked by the browser until the page is reloaded).
 */
async function authorizationOrigins(deps: ConnectionsDeps, backends: BackendConfig[], onError: (backend: BackendConfig, err: Error) => void): Promise<string[]> {
  const origins = await Promise.all(
    backends.map(async (backend) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no endpoints within ${ENDPOINTS_WAIT_MS} ms`)), ENDPOINTS_WAIT_MS);
      });
      try {
        return new URL((await Promise.race([deps.endpoints(backend), timeout])).authorizationUrl).origin;
      } catch (err) {
        onError(backend, err as Error);
        return undefined;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return origins.filter((o): o is string => o !== undefined);
}
