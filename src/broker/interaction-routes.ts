/**
 * The broker's interaction pages (`/oauth2/interaction/{uid}`): where oidc-provider sends the
 * browser when an authorization needs the user (SPEC §8).
 *
 * 1. Who the user is comes from the gateway's browser session (src/browser/browser-sessions.ts),
 *    established by the existing `/login` OIDC client at the upstream identity provider. No
 *    session → `/login?returnTo=` this page, and back here after sign-in.
 * 2. The provider's own login is then finished at once with the upstream `sub` as account id,
 *    and also whenever the provider's session names someone else than the browser session
 *    (the user signed in again as another account): the gateway's session always wins.
 * 3. Every authorization then shows the consent page (consent-page.ts); Allow records a grant
 *    of the scopes and resources asked for (and the user's policy claims, grant-claims.ts),
 *    Deny answers the client `access_denied`.
 * The pages get the gateway's Host/Origin guard, the form a CSRF token of the browser session,
 * and an expired or foreign interaction an error page; nothing here logs a token or a code.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { errors, type InteractionResults } from 'oidc-provider';
import type Provider from 'oidc-provider';
import { endpointResource } from '../auth/resources.js';
import type { Config } from '../config/schema.js';
import { loginUrl, registerFormParser, type BrowserSessions, type BrowserUser } from '../browser/browser-sessions.js';
import { CSRF_FIELD, errorPage, REDIRECT_HEADERS, refusalPage, sendPage, setPageErrorHandler } from '../browser/pages.js';
import { consentPage } from './consent-page.js';
import { pickClaims, type GrantClaims } from './grant-claims.js';
import { INTERACTION_PATH } from './provider.js';
import { resourceScopes } from './resource-servers.js';

export interface InteractionDeps {
  provider: Provider;
  config: Config;
  sessions: BrowserSessions;
  grantClaims: GrantClaims;
  /** The claims access policies read (grant-claims.ts `policyClaimNames`). */
  claimNames: string[];
  originGuard: onRequestHookHandler;
}

type Interaction = Awaited<ReturnType<Provider['interactionDetails']>>;
type Uid = { Params: { uid: string } };

export function registerInteractionRoutes(app: FastifyInstance, deps: InteractionDeps): void {
  const { provider, config, sessions } = deps;
  const basePath = new URL(config.publicUrl).pathname.replace(/\/+$/, '');
  const pageOf = (uid: string) => `${basePath}${INTERACTION_PATH}/${uid}`;
  /** The interaction this browser's cookie names, when it is the one in the URL. */
  async function interaction(request: FastifyRequest<Uid>, reply: FastifyReply): Promise<Interaction | undefined> {
    try {
      const details = await provider.interactionDetails(request.raw, reply.raw);
      return details.uid === request.params.uid ? details : undefined;
    } catch (err) {
      if (err instanceof errors.SessionNotFound) return undefined;
      throw err;
    }
  }

  async function finish(request: FastifyRequest, reply: FastifyReply, result: InteractionResults, merge = true): Promise<FastifyReply> {
    const returnTo = await provider.interactionResult(request.raw, reply.raw, result, { mergeWithLastSubmission: merge });
    return reply.code(303).headers({ ...REDIRECT_HEADERS, location: returnTo }).send();
  }

  const expired = (reply: FastifyReply) =>
    sendPage(reply, errorPage({ status: 400, title: 'Authorization expired', detail: 'This authorization request has expired, was already answered, or was started in another browser. Start again from your MCP client.' }));

  app.register(async (scope) => {
    registerFormParser(scope);
    setPageErrorHandler(scope);
    scope.addHook('onRequest', deps.originGuard);

    scope.get<Uid>(`${INTERACTION_PATH}/:uid`, async (request, reply) => {
      const details = await interaction(request, reply);
      if (!details) return expired(reply);
      const user = await sessions.current(request);
      if (!user) return reply.code(303).headers({ ...REDIRECT_HEADERS, location: loginUrl(pageOf(details.uid)) }).send();
      if (details.prompt.name !== 'consent' || details.session?.accountId !== user.sub) {
        return finish(request, reply, { login: { accountId: user.sub } }, false);
      }
      return sendPage(reply, await consentFor(deps, details, user, pageOf(details.uid)));
    });

    scope.post<Uid>(`${INTERACTION_PATH}/:uid`, async (request, reply) => {
      const details = await interaction(request, reply);
      if (!details) return expired(reply);
      const user = await sessions.current(request);
      // Signed out, or someone else now: the page (GET) sorts that out before anything is granted.
      if (!user || details.prompt.name !== 'consent' || details.session?.accountId !== user.sub) {
        return reply.code(303).headers({ ...REDIRECT_HEADERS, location: pageOf(details.uid) }).send();
      }
      const body = (request.body ?? {}) as Record<string, string>;
      if (!sessions.csrfValid(user, body[CSRF_FIELD])) {
        request.log.warn('broker consent: missing or wrong CSRF token');
        return sendPage(reply, refusalPage({ title: 'Authorization refused', reason: 'The consent form was not sent by this site (its security token is missing or wrong).' }));
      }
      if (body.action === 'deny') return finish(request, reply, { error: 'access_denied', error_description: 'the user denied the authorization' });
      if (body.action !== 'allow') return sendPage(reply, errorPage({ status: 400, title: 'Bad request', detail: 'The consent form carried no answer.' }));
      const grantId = await recordGrant(deps, details, user);
      request.log.info({ clientId: String(details.params.client_id).slice(0, 200) }, 'broker: authorization approved');
      return finish(request, reply, { consent: { grantId } });
    });
  });
}

/** Records what the consent prompt found missing, and the user's policy claims with it. */
async function recordGrant(deps: InteractionDeps, details: Interaction, user: BrowserUser): Promise<string> {
  const { provider, config } = deps;
  const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> };
  const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  const g = existing ?? new provider.Grant({ accountId: user.sub, clientId: String(details.params.client_id) });
  if (missing.missingOIDCScope) g.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) g.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) g.addResourceScope(indicator, scopes.join(' '));
  const grantId = await g.save();
  // The policy claims of the upstream sign-in, kept with the browser session.
  await deps.grantClaims.save(grantId, pickClaims(user.claims, deps.claimNames), config.auth.broker.refreshTokenTtl);
  return grantId;
}

/** What the consent page shows for this interaction. */
async function consentFor(deps: InteractionDeps, details: Interaction, user: BrowserUser, action: string) {
  const { provider, config } = deps;
  const { params } = details;
  const clientId = String(params.client_id);
  const client = await provider.Client.find(clientId);
  const requested = typeof params.resource === 'string' ? [params.resource] : Array.isArray(params.resource) ? (params.resource as string[]) : [config.auth.audience];
  const known = resourceScopes(config);
  const offered = new Set(requested.flatMap((r) => known.get(r) ?? []));
  return consentPage({
    ...(client?.clientName ? { clientName: client.clientName } : {}),
    clientId,
    metadataDocument: /^https?:\/\//.test(clientId),
    redirectUri: String(params.redirect_uri),
    accountLabel: user.label,
    resources: requested.map((identifier) => ({ identifier, label: resourceLabel(config, identifier) })),
    scopes: [...new Set(String(params.scope ?? '').split(' '))].filter((s) => offered.has(s)),
    lifetime: humanDuration(config.auth.broker.refreshTokenTtl),
    action,
    csrfToken: user.csrfToken,
  });
}

function resourceLabel(config: Config, identifier: string): string {
  if (identifier === endpointResource(config)) return 'All MCP servers of this gateway, through one endpoint';
  const backend = config.backends.find((b) => endpointResource(config, b.name) === identifier);
  if (backend) return `The MCP server "${backend.name}"`;
  return 'Every MCP endpoint of this gateway';
}

function humanDuration(ms: number): string {
  const [unit, size] = ms >= 86_400_000 ? ['day', 86_400_000] : ms >= 3_600_000 ? ['hour', 3_600_000] : ['minute', 60_000];
  const n = Math.max(1, Math.round(ms / (size as number)));
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}
