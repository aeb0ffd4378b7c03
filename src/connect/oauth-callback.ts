/**
 * Where providers send the browser back (SPEC §2 and §4 step 4): `GET /oauth/callback/{provider}`,
 * and `GET /oauth/callback` for providers registered there before per-provider redirect
 * URIs (only those configured without `discover`, see pending-authorization.ts).
 *
 * Order matters (issue 12, defects 2 and 6): the pending authorization is read, then the
 * browser session, user, path and RFC 9207 `iss` are compared with it, and only then is
 * `state` taken (single use). A leaked callback URL opened in another browser, or an answer
 * arriving at another provider's path, is refused and leaves the state usable by the
 * browser that started the flow; nothing is exchanged or stored.
 *
 * Then the code is exchanged with the PKCE verifier and the same redirect URI, the tokens
 * are stored encrypted, and either the elicitation is completed — its MCP session told on
 * whichever replica holds its stream, and no other — or, for Connect on /connections, the
 * browser goes back to /connections. Both end with the optional `afterLink` hook.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { BackendConfig, Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import type { StateStore } from '../state/store.js';
import type { BrowserSessions, BrowserUser } from '../browser/browser-sessions.js';
import type { Elicitation, ElicitationStore } from './elicitations.js';
import { connectedPage, errorPage, REDIRECT_HEADERS, refusalPage, sendPage, setPageErrorHandler, type Page } from '../browser/pages.js';
import { callbackMismatch, parsePending, readPending, takePending, type CallbackMismatch, type PendingAuthorization } from './pending-authorization.js';
import { exchangeCode, ProviderError } from '../providers/provider-client.js';
import { dpopKey, generateDpopKey } from '../backends/dpop.js';
import { sameIssuer, type EndpointResolver } from '../providers/provider-endpoints.js';
import type { TokenVault } from './token-vault.js';

/**
 * What the browser flow asks of the MCP layer, which it does not import (connect/ sits below
 * sessions/ and mcp/): deliver a gateway message to one MCP session, and bring the sessions
 * that waited for an account to life once it is linked.
 */
export interface LinkHooks {
  /** Delivers `data` (one JSON-RPC message) to the session's standalone stream, or its mailbox. */
  notify(userKey: string, sessionId: string, data: string): Promise<'delivered' | 'sent' | 'queued'>;
  afterLink?(link: { userKey: string; provider: string; elicitation?: Elicitation }): Promise<void>;
}

export interface CallbackDeps {
  config: Config;
  store: StateStore;
  metrics: Metrics;
  sessions: BrowserSessions;
  elicitations: ElicitationStore;
  vault: TokenVault;
  endpoints: EndpointResolver;
  hooks: LinkHooks;
}

type CallbackQuery = Record<string, string | string[] | undefined>;

export function registerCallbackRoutes(app: FastifyInstance, deps: CallbackDeps): void {
  app.register(async (scope) => {
    setPageErrorHandler(scope);
    scope.get<{ Querystring: CallbackQuery }>('/oauth/callback', (request, reply) => callback(deps, request, reply, undefined));
    scope.get<{ Params: { provider: string }; Querystring: CallbackQuery }>('/oauth/callback/:provider', (request, reply) => callback(deps, request, reply, request.params.provider));
  });
}

async function callback(deps: CallbackDeps, request: FastifyRequest<{ Querystring: CallbackQuery }>, reply: FastifyReply, pathProvider: string | undefined): Promise<FastifyReply> {
  const { state, code, error } = singleValues(request.query);
  // A repeated `iss` is no issuer: '' never equals one (RFC 9207 §2.4).
  const iss = Array.isArray(request.query.iss) ? '' : request.query.iss;
  const text = await readPending(deps.store, state);
  const pending = text && (await parsePending(text, deps.config.publicUrl, (id) => deps.elicitations.get(id)));
  if (!pending) return sendPage(reply, noLongerValid());
  const user = await deps.sessions.current(request);
  const mismatch = callbackMismatch(pending, { config: deps.config, pathProvider, user, iss });
  if (mismatch) {
    request.log.warn({ provider: pending.provider, pathProvider: pathProvider ?? null, mismatch }, 'OAuth callback refused; state left in place');
    return sendPage(reply, refusal(mismatch, pending.provider));
  }
  // Checked: now single use. Of two racing callbacks only one gets past here.
  if (!(await takePending(deps.store, state!, text!))) return sendPage(reply, noLongerValid());
  const signedIn = user!;

  let elicitation: Elicitation | undefined;
  if (pending.elicitationId !== undefined) {
    elicitation = await deps.elicitations.get(pending.elicitationId);
    if (!elicitation || elicitation.userKey !== signedIn.userKey || elicitation.status !== 'pending') {
      return sendPage(reply, errorPage({ status: 410, title: 'This link is no longer valid', detail: 'It has expired or was already used. Start again from your client.' }));
    }
  }
  const retryUrl = elicitation ? `/connect?elicitationId=${elicitation.id}` : '/connections';
  if (error || !code) return sendPage(reply, providerDidNotComplete(pending.provider, error, retryUrl));

  const backend = deps.config.backends.find((b) => b.name === pending.backend && b.upstreamAuth?.provider === pending.provider);
  if (!backend) return sendPage(reply, errorPage({ status: 410, title: 'This link is no longer valid', detail: `No server uses ${pending.provider} any more.` }));
  if (!(await exchangeAndStore(deps, request, reply, backend, pending, code, signedIn, retryUrl))) return reply;

  if (elicitation) {
    await complete(deps, request, elicitation);
    return sendPage(reply, connectedPage({ provider: elicitation.provider, serverName: elicitation.backend }));
  }
  request.log.info({ provider: pending.provider }, 'account linked from /connections');
  await afterLink(deps, request, { userKey: signedIn.userKey, provider: pending.provider });
  return reply.headers(REDIRECT_HEADERS).redirect('/connections', 303);
}

/** Exchanges the code (same redirect URI as the request) and stores the tokens; false after answering with an error page. */
async function exchangeAndStore(
  deps: CallbackDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  backend: BackendConfig,
  pending: PendingAuthorization,
  code: string,
  user: BrowserUser,
  retryUrl: string,
): Promise<boolean> {
  try {
    // The server the request went to: this replica discovers again when it holds another (issue 42 §6).
    const discovered = pending.issuer ? await deps.endpoints.current(backend, pending.issuer) : await deps.endpoints(backend);
    if (backend.upstreamAuth!.discover && !sameIssuer(discovered.issuer, pending.issuer)) {
      // The backend moved meanwhile: the code is for a server it no longer names, and goes nowhere else.
      request.log.warn({ provider: pending.provider }, 'the authorization server of this sign-in is no longer the backend\'s; code not exchanged');
      await sendPage(reply, errorPage({ status: 409, title: `${pending.provider} moved`, detail: 'The server now uses another authorization server. Nothing was stored; start again.', retryUrl }));
      return false;
    }
    // The scopes this request asked for (a step-up link's own): the granted ones when the answer does not name them.
    const endpoints = pending.scopes ? { ...discovered, scopes: pending.scopes } : discovered;
    // A server that takes DPoP (RFC 9449): the link gets a key pair of its own, proved at the exchange and kept with its tokens.
    const dpopJwk = endpoints.dpop ? await generateDpopKey() : undefined;
    const options = { ...endpoints.request, ...(dpopJwk ? { dpop: await dpopKey(dpopJwk) } : {}) };
    const tokens = await exchangeCode(endpoints, { code, redirectUri: pending.redirectUri, codeVerifier: pending.codeVerifier }, options);
    // The link records where it was made: once its backend names another server it is not used there (upstream-auth.ts).
    await deps.vault.put(user.userKey, pending.provider, { ...tokens, ...(discovered.issuer ? { issuer: discovered.issuer } : {}), ...(dpopJwk ? { dpopKey: dpopJwk } : {}) });
    return true;
  } catch (err) {
    const detail = err instanceof ProviderError && err.kind === 'oauth' ? `The provider refused the exchange (${err.oauthError ?? 'error'}).` : 'The provider could not be reached.';
    request.log.warn({ provider: pending.provider, kind: (err as ProviderError).kind }, 'code exchange failed');
    await sendPage(reply, errorPage({ status: 502, title: `Could not connect ${pending.provider}`, detail: `${detail} Nothing was stored; you can try again.`, retryUrl }));
    return false;
  }
}

/** Marks the elicitation complete and tells the MCP session that asked (MCP "Completion Notifications"). */
async function complete(deps: CallbackDeps, request: FastifyRequest, elicitation: Elicitation): Promise<void> {
  await deps.elicitations.setStatus(elicitation, 'complete');
  deps.metrics.elicitations.inc({ provider: elicitation.provider, event: 'completed' });
  if (elicitation.mcpSessionId) {
    const notification = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/elicitation/complete', params: { elicitationId: elicitation.id } });
    const how = await deps.hooks.notify(elicitation.userKey, elicitation.mcpSessionId, notification).catch((err: Error) => {
      request.log.warn({ err: err.message }, 'could not notify the MCP session');
      return 'failed';
    });
    request.log.info({ provider: elicitation.provider, delivery: how }, 'account linked');
  }
  await afterLink(deps, request, { userKey: elicitation.userKey, provider: elicitation.provider, elicitation });
}

/** The hook runs after the link is stored and announced; its failure never undoes or hides the link. */
async function afterLink(deps: CallbackDeps, request: FastifyRequest, link: { userKey: string; provider: string; elicitation?: Elicitation }): Promise<void> {
  if (!deps.hooks.afterLink) return;
  try {
    await deps.hooks.afterLink(link);
  } catch (err) {
    request.log.warn({ provider: link.provider, err: (err as Error).message }, 'after-link hook failed');
  }
}

function refusal(mismatch: CallbackMismatch, provider: string): Page {
  if (mismatch === 'another-browser') {
    return refusalPage({ title: 'Request refused', reason: 'This authorization was started in another browser session or by another account.' });
  }
  // Mix-up (RFC 9700 §4.4): the answer is not from where the request was sent.
  return refusalPage({ title: 'Request refused', reason: `This answer did not come back from ${provider} the way the request was sent, so it was not used.` });
}

function providerDidNotComplete(provider: string, error: string | undefined, retryUrl: string): Page {
  // An elicitation stays pending: the user may try again with the same link.
  const denied = error === 'access_denied';
  return errorPage({
    status: denied ? 403 : 400,
    title: denied ? `You declined at ${provider}` : `${provider} did not complete the sign-in`,
    detail: denied ? 'Nothing was connected. You can try again.' : `The provider answered: ${String(error ?? 'no code')}. Nothing was connected.`,
    retryUrl,
  });
}

function noLongerValid(): Page {
  return errorPage({ status: 400, title: 'This sign-in link is no longer valid', detail: 'It has expired or was already used. Start again from your client.' });
}

/** `state`, `code`, `error` as single strings; a repeated parameter counts as absent. */
function singleValues(query: CallbackQuery): { state?: string; code?: string; error?: string } {
  const one = (v: string | string[] | undefined) => (typeof v === 'string' ? v : undefined);
  return { state: one(query.state), code: one(query.code), error: one(query.error) };
}
