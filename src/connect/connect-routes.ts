/**
 * The URL-mode elicitation pages (SPEC §4 steps 3–4; MCP 2025-11-25 "Elicitation",
 * "URL Mode Elicitation for OAuth Flows" and "Phishing"):
 *
 * - `GET /connect?elicitationId=…`: needs a browser session (else sign-in and back); refuses,
 *   changing nothing, when the signed-in user is not the one the link was made for; else a
 *   consent page naming the server, provider and the scopes the authorization request will
 *   carry (configured, or with `discover` the ones found there; a step-up link's own).
 * - `POST /connect`: CSRF-checked. Cancel declines the elicitation; Continue redirects to the
 *   provider with PKCE S256 and a single-use `state` bound to this elicitation and this
 *   browser session (pending-authorization.ts).
 *
 * The provider's answer comes back to oauth-callback.ts.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BackendConfig } from '../config/schema.js';
import { loginUrl, registerFormParser, type BrowserUser } from '../browser/browser-sessions.js';
import type { Elicitation } from './elicitations.js';
import type { CallbackDeps } from './oauth-callback.js';
import { consentPage, declinedPage, errorPage, REDIRECT_HEADERS, refusalPage, sendPage, setPageErrorHandler } from '../browser/pages.js';
import { beginAuthorization } from './pending-authorization.js';
import type { ResolvedProvider } from '../providers/provider-endpoints.js';
import { OFFLINE_ACCESS } from '../providers/upstream-discovery.js';

/** The connect pages need what the callback needs: both ends of one flow. */
export type ConnectDeps = CallbackDeps;

export function registerConnectRoutes(app: FastifyInstance, deps: ConnectDeps): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);

    scope.get<{ Querystring: { elicitationId?: string } }>('/connect', async (request, reply) => {
      const id = String(request.query.elicitationId ?? '');
      const checked = await signedInOwner(deps, request, reply, id);
      if (!checked) return reply;
      const { user, elicitation, backend } = checked;
      const endpoints = asked(await providerOrPage(deps, request, reply, backend, `/connect?elicitationId=${elicitation.id}`, elicitation.issuer), elicitation);
      if (!endpoints) return reply;
      return sendPage(
        reply,
        consentPage({
          serverName: backend.name,
          provider: elicitation.provider,
          // What the authorization request will ask for (with `discover` and no configured
          // scopes, the discovered ones), never just what the config lists.
          scopes: endpoints.scopes.filter((s) => s !== ''),
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
        deps.metrics.elicitations.inc({ provider: elicitation.provider, event: 'declined' });
        return sendPage(reply, declinedPage({ provider: elicitation.provider }));
      }
      if (form.action !== 'continue') return sendPage(reply, errorPage({ status: 400, title: 'Unknown action', detail: 'Choose Continue or Cancel.' }));
      const endpoints = asked(await providerOrPage(deps, request, reply, backend, `/connect?elicitationId=${elicitation.id}`, elicitation.issuer), elicitation);
      if (!endpoints) return reply;
      const location = await beginAuthorization(deps.store, { publicUrl: deps.config.publicUrl, endpoints, user, provider: elicitation.provider, backend: backend.name, elicitationId: elicitation.id });
      return reply.headers(REDIRECT_HEADERS).redirect(location, 303);
    });
  });
}

/**
 * The provider's endpoints, or undefined after answering with an error page (discovery
 * failed); `retryUrl` is where the page's "Try again" leads. `issuer`: the authorization
 * server the link was made for (an elicitation's), which a replica holding another discovers
 * again (issue 42 §6).
 */
export async function providerOrPage(
  deps: Pick<ConnectDeps, 'endpoints'>,
  request: FastifyRequest,
  reply: FastifyReply,
  backend: BackendConfig,
  retryUrl: string,
  issuer?: string,
): Promise<ResolvedProvider | undefined> {
  const provider = backend.upstreamAuth!.provider;
  try {
    return await (issuer ? deps.endpoints.current(backend, issuer) : deps.endpoints(backend));
  } catch (err) {
    request.log.warn({ err: (err as Error).message, provider }, 'provider endpoints unavailable');
    await sendPage(reply, errorPage({ status: 502, title: `Cannot reach ${provider}`, detail: 'The account provider could not be reached. Try again in a moment.', retryUrl }));
    return undefined;
  }
}

/**
 * The endpoints with the scopes this elicitation's authorization request asks for: a step-up
 * link's own (the scopes granted so far and those the backend's 401 or 403 wants), else the
 * backend's — with `offline_access` where the backend's own include it (the server offers it).
 */
function asked(endpoints: ResolvedProvider | undefined, elicitation: Elicitation): ResolvedProvider | undefined {
  if (!endpoints || !elicitation.scopes) return endpoints;
  const offline = endpoints.scopes.includes(OFFLINE_ACCESS) && !elicitation.scopes.includes(OFFLINE_ACCESS);
  return { ...endpoints, scopes: offline ? [...elicitation.scopes, OFFLINE_ACCESS] : elicitation.scopes };
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
