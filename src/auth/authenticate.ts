/**
 * The resource-server gate in front of every MCP route (MCP 2025-11-25 "Authorization"):
 * a bearer token in the Authorization header (never the query string), verified by
 * token-verifier.ts, carrying the globally required scopes plus the backend's. Failures
 * answer 401/403 with a `WWW-Authenticate` challenge naming our RFC 9728 metadata.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/schema.js';
import { derived } from '../config/live-config.js';
import { AuthError, wwwAuthenticate } from './errors.js';
import { acceptedAudiences, advertisedScopes, audienceMatches, namedEndpoints } from './resources.js';
import type { Principal } from './principal.js';
import { SubjectToken } from './subject-token.js';
import type { TokenVerifier } from './token-verifier.js';
import { bindRequestLog } from '../ops/request-logger.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    /** The verified bearer token, kept (redacted when printed) only when a backend has `tokenExchange`. */
    subjectToken?: SubjectToken;
  }
}

/**
 * The verified principal of a request on a route behind `authenticate`. Every MCP route is;
 * a handler reaching this without one is a wiring error, never a client's: it fails loudly
 * (500) rather than serving a request as nobody.
 */
export function principalOf(request: FastifyRequest): Principal {
  const principal = request.principal;
  if (!principal) throw new Error('an MCP handler ran without an authenticated principal');
  return principal;
}

/** The RFC 9728 metadata URL for an MCP path ("" for the aggregated endpoint). */
export function resourceMetadataUrl(config: Config, backend?: string): string {
  return `${config.publicUrl}/.well-known/oauth-protected-resource/mcp${backend ? `/${backend}` : ''}`;
}

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header);
  return match?.[1];
}

/** What a request to one MCP path must carry, and where its challenge points. */
interface PathRequirement {
  metadataUrl: string;
  required: string[];
  /** Advertised in the 401 challenge's `scope` (resources.ts). */
  advertised: string[];
  /** `aud` values that open this path: the configured audience and the path's own resource. */
  audiences: string[];
}

export function createAuthenticate(config: Config, verifier: TokenVerifier, onFailure: (code: AuthError['code']) => void = () => {}) {
  // Worked out once per backend, not per request, and again after a reload changed the
  // backends (config/live-config.ts).
  const paths = derived(config, pathRequirements);
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const backendName = (request.params as { backend?: string } | undefined)?.backend;
    const { gatewayWide, keepsToken, perBackend } = paths();
    const { metadataUrl, required, advertised, audiences } = (backendName && perBackend.get(backendName)) || gatewayWide;
    try {
      const token = bearerToken(request.headers.authorization);
      if (!token) {
        throw new AuthError(
          'missing_token',
          request.headers.authorization ? 'Authorization header is not a bearer token' : 'bearer token required',
          advertised,
        );
      }
      const principal = await verifier.verify(token).catch((err: unknown) => {
        throw err instanceof AuthError && err.code === 'invalid_token' ? new AuthError(err.code, err.message, advertised) : err;
      });
      // A token made out to another endpoint's own resource does not open this one.
      if (!audienceMatches(principal.claims.aud, audiences)) throw new AuthError('invalid_token', 'token claim "aud" is invalid for this endpoint', advertised);
      const missing = required.filter((s) => !principal.scopes.has(s));
      if (missing.length) throw new AuthError('insufficient_scope', `token lacks scope ${missing.join(' ')}`, required);
      request.principal = principal;
      if (keepsToken) request.subjectToken = new SubjectToken(token);
      // Every later line of this request names the caller (SPEC §6), without a child logger
      // until the request writes one (ops/request-logger.ts); the access line reads the principal.
      bindRequestLog(request.log, backendName ? { sub: principal.sub, backend: backendName } : { sub: principal.sub });
    } catch (err) {
      if (!(err instanceof AuthError)) throw err;
      onFailure(err.code);
      request.log.info({ authError: err.code, reason: err.message }, 'request not authorized');
      if (err.status === 503) reply.header('retry-after', '5');
      else reply.header('www-authenticate', wwwAuthenticate(err, metadataUrl));
      await reply
        .code(err.status)
        .type('application/json')
        .send({ error: err.code === 'missing_token' ? 'invalid_request' : err.code, error_description: err.message });
    }
  };
}

/**
 * What each path asks of a token. An unknown backend's challenge points at the gateway-wide
 * metadata, which exists. Backends with `tokenExchange` need the caller's token kept (src/exchange/).
 */
function pathRequirements(config: Config): { gatewayWide: PathRequirement; keepsToken: boolean; perBackend: Map<string, PathRequirement> } {
  const gatewayWide: PathRequirement = { metadataUrl: resourceMetadataUrl(config), required: [...config.auth.requiredScopes], advertised: advertisedScopes(config), audiences: acceptedAudiences(config) };
  const keepsToken = config.backends.some((b) => b.tokenExchange);
  // Backends and virtual servers (`servers`): each `/mcp/{name}` is a resource of its own.
  const perBackend = new Map<string, PathRequirement>(
    namedEndpoints(config).map((e) => [e.name, { metadataUrl: resourceMetadataUrl(config, e.name), required: e.required, advertised: e.advertised, audiences: acceptedAudiences(config, e.name) }]),
  );
  return { gatewayWide, keepsToken, perBackend };
}
