/**
 * `/connections` (SPEC §2): the signed-in user's linked accounts, one row per provider the
 * configured backends use, with status and expiry; `POST /connections/{provider}/disconnect`
 * (CSRF-checked) revokes the tokens at the provider where it supports RFC 7009 and deletes
 * them here either way.
 */
import type { FastifyInstance } from 'fastify';
import type { BackendConfig, Config } from '../config/schema.js';
import { loginUrl, registerFormParser, type BrowserSessions } from './browser-sessions.js';
import { connectionsPage, errorPage, refusalPage, sendPage, setPageErrorHandler } from './pages.js';
import { REDIRECT_HEADERS } from './connect-routes.js';
import { revokeToken } from './provider-client.js';
import type { ResolvedProvider } from './provider-endpoints.js';
import type { TokenVault } from './token-vault.js';

export interface ConnectionsDeps {
  config: Config;
  sessions: BrowserSessions;
  vault: TokenVault;
  endpoints(backend: BackendConfig): Promise<ResolvedProvider>;
}

export function registerConnectionsRoutes(app: FastifyInstance, deps: ConnectionsDeps): void {
  /** One backend per provider: the one whose endpoints revoke that provider's tokens. */
  const providers = new Map<string, BackendConfig>();
  for (const backend of deps.config.backends) if (backend.upstreamAuth && !providers.has(backend.upstreamAuth.provider)) providers.set(backend.upstreamAuth.provider, backend);

  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);

    scope.get('/connections', async (request, reply) => {
      const user = await deps.sessions.current(request);
      if (!user) return reply.headers(REDIRECT_HEADERS).redirect(loginUrl('/connections'), 303);
      const connections = await Promise.all(
        [...providers.keys()].map(async (provider) => {
          const tokens = await deps.vault.get(user.userKey, provider);
          if (!tokens) return { provider, status: 'not connected' as const };
          const expired = tokens.expiresAt !== undefined && tokens.expiresAt <= Date.now() && !tokens.refreshToken;
          return { provider, status: expired ? ('expired' as const) : ('connected' as const), ...(tokens.expiresAt ? { expiresAt: tokens.expiresAt } : {}) };
        }),
      );
      return sendPage(reply, connectionsPage({ accountLabel: user.label, connections, csrfToken: user.csrfToken }));
    });

    scope.post<{ Params: { provider: string }; Body: Record<string, string> }>('/connections/:provider/disconnect', async (request, reply) => {
      const user = await deps.sessions.current(request);
      if (!user) return reply.headers(REDIRECT_HEADERS).redirect(loginUrl('/connections'), 303);
      if (!deps.sessions.csrfValid(user, request.body?.csrf)) {
        return sendPage(reply, refusalPage({ title: 'Request refused', reason: 'This form has expired or did not come from this site.' }));
      }
      const backend = providers.get(request.params.provider);
      if (!backend) return sendPage(reply, errorPage({ status: 404, title: 'Unknown provider', detail: 'No backend uses this provider.' }));
      const tokens = await deps.vault.get(user.userKey, request.params.provider);
      if (tokens) {
        try {
          const endpoints = await deps.endpoints(backend);
          if (tokens.refreshToken) await revokeToken(endpoints, tokens.refreshToken, 'refresh_token', endpoints.request);
          await revokeToken(endpoints, tokens.accessToken, 'access_token', endpoints.request);
        } catch (err) {
          // Deleting here is what matters; the provider may not support revocation or be down.
          request.log.warn({ provider: request.params.provider, err: (err as Error).message }, 'token revocation failed; deleting anyway');
        }
        await deps.vault.delete(user.userKey, request.params.provider);
      }
      return reply.headers(REDIRECT_HEADERS).redirect('/connections', 303);
    });
  });
}
