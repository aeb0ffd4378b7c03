/**
 * oidc-provider (a Koa app) mounted into Fastify: its endpoints under `/oauth2/` — each route
 * declared here, so the HTTP surface is explicit (openapi/openapi.yaml) and anything else is
 * the gateway's 404 — and the RFC 8414 metadata at `/.well-known/oauth-authorization-server`
 * go to `provider.callback()` with the raw Node request and response.
 *
 * - The body is left unread (a pass-through content-type parser) for oidc-provider to parse
 *   within its own limits; the gateway's JSON-only parsing does not apply here. Registration
 *   is the exception: registration-gate.ts reads and checks it first, then hands the same
 *   bytes over.
 * - `X-Forwarded-Proto` and `X-Forwarded-Host` are set from `publicUrl` (the provider runs
 *   with `proxy = true`), replacing whatever the client sent, so every URL the provider
 *   writes — issuer, endpoints, redirects to the consent page — is under `publicUrl`
 *   whatever Host the request came with.
 * - RFC 8414 §3: the metadata of issuer `publicUrl` is at `/.well-known/oauth-authorization-server`;
 *   it is oidc-provider's discovery document, with Client ID Metadata Document support added
 *   (a Koa middleware: `provider.use` runs before its routes).
 * - A token response leaves `scope` out rather than answer `"scope": ""` (RFC 6749 §3.3, §5.1).
 */
import { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type Provider from 'oidc-provider';
import type { Config } from '../config/schema.js';
import { BROKER_ROUTES } from './provider.js';
import { registerRegistrationRoute, type RegistrationGateDeps } from './registration-gate.js';

const DISCOVERY = '/.well-known/openid-configuration';

export interface MountOptions {
  /** Scopes for an authorization request that names none (SPEC §8: `auth.scopes`; default-scope.ts); never empty. */
  defaultScope: string;
  clientIdMetadataDocuments: boolean;
  /** RFC 7591 registration, when on (`auth.broker.registration`): its limits and their counter (registration-gate.ts). */
  registration?: Omit<RegistrationGateDeps, 'forward'>;
}

export function mountProvider(app: FastifyInstance, provider: Provider, config: Config, options: MountOptions): void {
  const publicUrl = new URL(config.publicUrl);
  // A publicUrl with a path (an ingress that strips it): the provider writes its URLs under it.
  const basePath = publicUrl.pathname.replace(/\/+$/, '');
  provider.use(async (ctx, next) => {
    // No scope, or an empty one (RFC 6749 §3.3): the default (default-scope.ts).
    if (ctx.method === 'GET' && ctx.path === BROKER_ROUTES.authorization && !ctx.query.scope) {
      ctx.query = { ...ctx.query, scope: options.defaultScope };
    }
    await next();
    if (ctx.path === DISCOVERY && ctx.status === 200 && ctx.body && typeof ctx.body === 'object') {
      if (options.clientIdMetadataDocuments) (ctx.body as Record<string, unknown>).client_id_metadata_document_supported = true;
    }
    // RFC 6749 §5.1: `scope` is a list of one or more scopes; a token that grants none (no
    // scope requested and no `auth.scopes`) leaves the member out instead of sending "".
    if (ctx.path === BROKER_ROUTES.token && ctx.body && typeof ctx.body === 'object' && (ctx.body as Record<string, unknown>).scope === '') {
      delete (ctx.body as Record<string, unknown>).scope;
    }
  });
  const callback = provider.callback();
  const forward = async (request: FastifyRequest, reply: FastifyReply, url?: string, body?: Buffer) => {
    // A body the gateway read already (registration) is handed over as a request that still has it.
    const raw = body ? withBody(request.raw, body) : request.raw;
    if (url !== undefined) raw.url = url;
    if (basePath) (raw as { originalUrl?: string }).originalUrl = basePath + raw.url;
    raw.headers['x-forwarded-proto'] = publicUrl.protocol.slice(0, -1);
    raw.headers['x-forwarded-host'] = publicUrl.host;
    reply.hijack();
    await callback(raw, reply.raw);
  };
  const routes: Array<[Array<'GET' | 'POST' | 'OPTIONS'>, string]> = [
    [['GET'], BROKER_ROUTES.authorization],
    // Where the provider resumes an authorization after the consent page.
    [['GET'], `${BROKER_ROUTES.authorization}/:uid`],
    [['POST', 'OPTIONS'], BROKER_ROUTES.token],
    [['POST', 'OPTIONS'], BROKER_ROUTES.revocation],
    [['GET', 'OPTIONS'], BROKER_ROUTES.jwks],
  ];
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null));
    for (const [method, url] of routes) scope.route({ method, url, handler: (request, reply) => forward(request, reply) });
    scope.route({ method: ['GET', 'OPTIONS'], url: '/.well-known/oauth-authorization-server', handler: (request, reply) => forward(request, reply, DISCOVERY) });
  });
  if (options.registration) {
    registerRegistrationRoute(app, BROKER_ROUTES.registration, { ...options.registration, forward: (request, reply, body) => forward(request, reply, undefined, body) });
  }
}

/** The same request (socket, method, URL, headers) with `body` to read again, for the provider's own body parser. */
function withBody(original: IncomingMessage, body: Buffer): IncomingMessage {
  const copy = new IncomingMessage(original.socket);
  copy.method = original.method!;
  copy.url = original.url!;
  copy.httpVersion = original.httpVersion;
  copy.headers = { ...original.headers, 'content-length': String(body.length) };
  delete copy.headers['transfer-encoding'];
  // Complete, as the original is: an incomplete IncomingMessage destroys its socket when it ends.
  copy.complete = true;
  copy.push(body);
  copy.push(null);
  return copy;
}
