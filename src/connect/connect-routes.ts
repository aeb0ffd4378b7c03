/**
 * The URL-mode elicitation pages (SPEC §4 steps 3–4; MCP 2025-11-25 "Elicitation",
 * "URL Mode Elicitation for OAuth Flows" and "Phishing"):
 *
 * - `GET /connect?elicitationId=…`: needs a browser session (else sign-in and back); refuses,
 *   changing nothing, when the signed-in user is not the one the link was made for; else a
 *   consent page naming the server, provider and scopes.
 * - `POST /connect`: CSRF-checked. Cancel declines the elicitation; Continue redirects to the
 *   provider with PKCE S256 and a single-use `state` bound to this elicitation and this
 *   browser session.
 * - `GET /oauth/callback`: checks `state`, browser session and user again, exchanges the code,
 *   stores the tokens encrypted, completes the elicitation and tells the MCP session that
 *   asked — on whichever replica holds its stream — and no other.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BackendConfig, Config } from '../config/schema.js';
import type { McpContext } from '../mcp/context.js';
import { notifySession } from '../mcp/session-notifier.js';
import type { StateStore } from '../state/store.js';
import { loginUrl, registerFormParser, type BrowserSessions, type BrowserUser } from './browser-sessions.js';
import type { Elicitation, ElicitationStore } from './elicitations.js';
import { connectedPage, consentPage, declinedPage, errorPage, refusalPage, sendPage, setPageErrorHandler } from './pages.js';
import { authorizationRequestUrl, createPkce, exchangeCode, ProviderError } from './provider-client.js';
import type { ResolvedProvider } from './provider-endpoints.js';
import type { TokenVault } from './token-vault.js';

export interface ConnectDeps {
  config: Config;
  store: StateStore;
  mcp: McpContext;
  sessions: BrowserSessions;
  elicitations: ElicitationStore;
  vault: TokenVault;
  endpoints(backend: BackendConfig): Promise<ResolvedProvider>;
}

interface PendingAuthorization {
  elicitationId: string;
  browserSessionId: string;
  userKey: string;
  codeVerifier: string;
}

const STATE_TTL_MS = 10 * 60_000;
/** Redirects of the flow are not cached and carry no referrer to other sites. */
export const REDIRECT_HEADERS = { 'cache-control': 'no-store', 'referrer-policy': 'same-origin' } as const;
const stateKey = (state: string) => `oauth-state:${state}`;

export function registerConnectRoutes(app: FastifyInstance, deps: ConnectDeps): void {
  const redirectUri = `${deps.config.publicUrl}/oauth/callback`;

  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);

    scope.get<{ Querystring: { elicitationId?: string } }>('/connect', async (request, reply) => {
      const id = String(request.query.elicitationId ?? '');
      const checked = await signedInOwner(deps, request, reply, id);
      if (!checked) return reply;
      const { user, elicitation, backend } = checked;
      const endpoints = await providerOrPage(deps, request, reply, backend, elicitation);
      if (!endpoints) return reply;
      return sendPage(
        reply,
        consentPage({
          serverName: backend.name,
          provider: elicitation.provider,
          scopes: backend.upstreamAuth?.scopes ?? [],
          accountLabel: user.label,
          elicitationId: elicitation.id,
          csrfToken: user.csrfToken,
          // Continue answers with a 303 to the provider: CSP form-action covers that redirect.
          formActions: [new URL(endpoints.authorizationUrl).origin],
        }),
      );
    });

    scope.post<{ Body: Record<string, string> }>('/connect', async (request, reply) => {
      const form = request.body ?? {};
      const id = String(form.elicitationId ?? '');
      const checked = await signedInOwner(deps, request, reply, id);
      if (!checked) return reply;
      const { user, elicitation, backend } = checked;
      if (!deps.sessions.csrfValid(user, form.csrf)) {
        return sendPage(reply, refusalPage({ title: 'Request refused', reason: 'This form has expired or did not come from this site. Open the link from your client again.' }));
      }
      if (form.action === 'cancel') {
        await deps.elicitations.setStatus(elicitation, 'declined');
        deps.mcp.metrics.elicitations.inc({ provider: elicitation.provider, event: 'declined' });
        return sendPage(reply, declinedPage({ provider: elicitation.provider }));
      }
      if (form.action !== 'continue') return sendPage(reply, errorPage({ status: 400, title: 'Unknown action', detail: 'Choose Continue or Cancel.' }));
      const endpoints = await providerOrPage(deps, request, reply, backend, elicitation);
      if (!endpoints) return reply;
      const pkce = createPkce();
      const state = randomBytes(32).toString('base64url');
      const pending: PendingAuthorization = { elicitationId: elicitation.id, browserSessionId: user.sessionId, userKey: user.userKey, codeVerifier: pkce.verifier };
      await deps.store.putValue(stateKey(state), JSON.stringify(pending), STATE_TTL_MS);
      return reply.headers(REDIRECT_HEADERS).redirect(authorizationRequestUrl(endpoints, { redirectUri, state, codeChallenge: pkce.challenge }), 303);
    });

    scope.get<{ Querystring: Record<string, string | undefined> }>('/oauth/callback', async (request, reply) => {
      const { state, code, error } = request.query;
      // Single use: taken, not read. A replayed or forged state finds nothing.
      const pendingText = state ? await deps.store.takeValue(stateKey(state)) : undefined;
      if (!pendingText) {
        return sendPage(reply, errorPage({ status: 400, title: 'This sign-in link is no longer valid', detail: 'It has expired or was already used. Start again from your client.' }));
      }
      const pending = JSON.parse(pendingText) as PendingAuthorization;
      const user = await deps.sessions.current(request);
      if (!user || user.sessionId !== pending.browserSessionId || user.userKey !== pending.userKey) {
        return sendPage(reply, refusalPage({ title: 'Request refused', reason: 'This authorization was started in another browser session or by another account.' }));
      }
      const elicitation = await deps.elicitations.get(pending.elicitationId);
      if (!elicitation || elicitation.userKey !== user.userKey || elicitation.status !== 'pending') {
        return sendPage(reply, errorPage({ status: 410, title: 'This link is no longer valid', detail: 'It has expired or was already used. Start again from your client.' }));
      }
      const retryUrl = `/connect?elicitationId=${elicitation.id}`;
      if (error || !code) {
        // The elicitation stays pending: the user may try again with the same link.
        const denied = error === 'access_denied';
        return sendPage(
          reply,
          errorPage({
            status: denied ? 403 : 400,
            title: denied ? `You declined at ${elicitation.provider}` : `${elicitation.provider} did not complete the sign-in`,
            detail: denied ? 'Nothing was connected. You can try again.' : `The provider answered: ${String(error ?? 'no code')}. Nothing was connected.`,
            retryUrl,
          }),
        );
      }
      const backend = deps.config.backends.find((b) => b.name === elicitation.backend)!;
      try {
        const endpoints = await deps.endpoints(backend);
        const tokens = await exchangeCode(endpoints, { code, redirectUri, codeVerifier: pending.codeVerifier }, endpoints.request);
        await deps.vault.put(user.userKey, elicitation.provider, tokens);
      } catch (err) {
        const detail = err instanceof ProviderError && err.kind === 'oauth' ? `The provider refused the exchange (${err.oauthError ?? 'error'}).` : 'The provider could not be reached.';
        request.log.warn({ provider: elicitation.provider, kind: (err as ProviderError).kind }, 'code exchange failed');
        return sendPage(reply, errorPage({ status: 502, title: `Could not connect ${elicitation.provider}`, detail: `${detail} Nothing was stored; you can try again.`, retryUrl }));
      }
      await complete(deps, request, elicitation);
      return sendPage(reply, connectedPage({ provider: elicitation.provider, serverName: elicitation.backend }));
    });
  });
}

/** The provider's endpoints, or undefined after answering with an error page (discovery failed). */
async function providerOrPage(deps: ConnectDeps, request: FastifyRequest, reply: FastifyReply, backend: BackendConfig, elicitation: Elicitation): Promise<ResolvedProvider | undefined> {
  try {
    return await deps.endpoints(backend);
  } catch (err) {
    request.log.warn({ err: (err as Error).message, provider: elicitation.provider }, 'provider endpoints unavailable');
    await sendPage(reply, errorPage({ status: 502, title: `Cannot reach ${elicitation.provider}`, detail: 'The account provider could not be reached. Try again in a moment.', retryUrl: `/connect?elicitationId=${elicitation.id}` }));
    return undefined;
  }
}

/**
 * The signed-in owner of a pending elicitation, or undefined after answering: sign-in first,
 * unknown/expired/used links, and a link made for another account (changing nothing).
 */
async function signedInOwner(deps: ConnectDeps, request: FastifyRequest, reply: FastifyReply, id: string): Promise<{ user: BrowserUser; elicitation: Elicitation; backend: BackendConfig } | undefined> {
  const user = await deps.sessions.current(request);
  if (!user) {
    await reply.headers(REDIRECT_HEADERS).redirect(loginUrl(`/connect?elicitationId=${encodeURIComponent(id)}`), 303);
    return undefined;
  }
  const elicitation = await deps.elicitations.get(id);
  if (!elicitation) {
    await sendPage(reply, errorPage({ status: 404, title: 'This link is unknown or has expired', detail: 'Start again from your client to get a new link.' }));
    return undefined;
  }
  if (elicitation.userKey !== user.userKey) {
    request.log.warn({ elicitationOwnerMatches: false }, 'connect link opened by another account');
    await sendPage(reply, refusalPage({ title: 'This link is not for your account', reason: `You are signed in as ${user.label}, but this link was created for a different account. Nothing was changed. If you did not expect this link, close this page.` }));
    return undefined;
  }
  if (elicitation.status !== 'pending') {
    await sendPage(reply, errorPage({ status: 410, title: 'This link was already used', detail: elicitation.status === 'complete' ? 'The account is connected. Return to your client.' : 'It was cancelled. Start again from your client.' }));
    return undefined;
  }
  const backend = deps.config.backends.find((b) => b.name === elicitation.backend);
  if (!backend?.upstreamAuth) {
    await sendPage(reply, errorPage({ status: 404, title: 'This link is unknown', detail: 'Start again from your client.' }));
    return undefined;
  }
  return { user, elicitation, backend };
}

/** Marks the elicitation complete and tells the MCP session that asked (MCP "Completion Notifications"). */
async function complete(deps: ConnectDeps, request: FastifyRequest, elicitation: Elicitation): Promise<void> {
  await deps.elicitations.setStatus(elicitation, 'complete');
  deps.mcp.metrics.elicitations.inc({ provider: elicitation.provider, event: 'completed' });
  if (!elicitation.mcpSessionId) return;
  const notification = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId: elicitation.id } });
  const how = await notifySession(deps.mcp, elicitation.userKey, elicitation.mcpSessionId, notification).catch((err: Error) => {
    request.log.warn({ err: err.message }, 'could not notify the MCP session');
    return 'failed';
  });
  request.log.info({ provider: elicitation.provider, delivery: how }, 'account linked');
}
