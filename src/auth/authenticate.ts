/**
 * The resource-server gate in front of every MCP route (MCP 2025-11-25 "Authorization"):
 * a bearer token in the Authorization header (never the query string), verified by
 * token-verifier.ts, carrying the globally required scopes plus the backend's. Failures
 * answer 401/403 with a `WWW-Authenticate` challenge naming our RFC 9728 metadata.
 */
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Config } from '../config/schema.js';
import { derived } from '../config/live-config.js';
import { AuthError, wwwAuthenticate } from './errors.js';
import { acceptedAudiences, advertisedScopes, audienceMatches, namedEndpoints } from './resources.js';
import type { Principal } from './principal.js';
import { SubjectToken } from './subject-token.js';
import type { TokenVerifier } from './token-verifier.js';
import { bindRequestLog } from '../ops/request-logger.js';
import { headersOf } from '../wire/headers.js';

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

/**
 * The bearer header last verified on each client connection, with the token it carried and
 * the principal it proved. A client sends the same header on every request of a connection,
 * so a request whose header is that very string skips the header's parsing and the verifier's
 * cache (a lookup that hashes the whole token: with the bearer regex, about 5 % of a proxied
 * call's instructions, issue 29). Kept only while the verifier would keep it
 * ({@link TokenVerifier.isCurrent}); what each path asks of the token (audience, scopes) is
 * checked on every request, as before. A connection forgets it when it closes (weak keys).
 */
interface VerifiedHeader {
  header: string;
  token: string;
  principal: Principal;
}

export function createAuthenticate(config: Config, verifier: TokenVerifier, onFailure: (code: AuthError['code']) => void = () => {}): onRequestHookHandler {
  // Worked out once per backend, not per request, and again after a reload changed the
  // backends (config/live-config.ts).
  const paths = derived(config, pathRequirements);
  const verifiedOnConnection = new WeakMap<object, VerifiedHeader>();
  /**
   * One entry per verified token, shared by every connection that sends it (keyed by the
   * verifier's principal, one object per cached token): each connection's own would keep its
   * copy of the header — a JWT, about 0.65 KiB — for as long as the connection lives, which
   * for an idle SSE stream is hours (issue 45 §3: 10,000 idle streams of 100 users).
   */
  const verifiedByPrincipal = new WeakMap<Principal, VerifiedHeader>();

  function shared(header: string, token: string, principal: Principal): VerifiedHeader {
    const known = verifiedByPrincipal.get(principal);
    if (known !== undefined && known.header === header) return known;
    const verified = { header, token, principal };
    verifiedByPrincipal.set(principal, verified);
    return verified;
  }

  /** Lets the request in (true) or answers it with the path's refusal. */
  function admit(request: FastifyRequest, reply: FastifyReply, backendName: string | undefined, path: PathRequirement, keepsToken: boolean, verified: VerifiedHeader): boolean {
    const { principal } = verified;
    // A token made out to another endpoint's own resource does not open this one.
    if (!audienceMatches(principal.claims.aud, path.audiences)) return refuse(request, reply, path, new AuthError('invalid_token', 'token claim "aud" is invalid for this endpoint', path.advertised));
    const missing = path.required.filter((s) => !principal.scopes.has(s));
    if (missing.length) return refuse(request, reply, path, new AuthError('insufficient_scope', `token lacks scope ${missing.join(' ')}`, path.required));
    request.principal = principal;
    if (keepsToken) request.subjectToken = new SubjectToken(verified.token);
    // Every later line of this request names the caller (SPEC §6), without a child logger
    // until the request writes one (ops/request-logger.ts); the access line reads the principal.
    bindRequestLog(request.log, backendName ? { sub: principal.sub, backend: backendName } : { sub: principal.sub });
    return true;
  }

  function refuse(request: FastifyRequest, reply: FastifyReply, path: PathRequirement, err: AuthError): false {
    onFailure(err.code);
    request.log.info({ authError: err.code, reason: err.message }, 'request not authorized');
    if (err.status === 503) reply.header('retry-after', '5');
    else reply.header('www-authenticate', wwwAuthenticate(err, path.metadataUrl));
    void reply
      .code(err.status)
      .type('application/json')
      .send({ error: err.code === 'missing_token' ? 'invalid_request' : err.code, error_description: err.message });
    return false;
  }

  // A callback hook, not an async one: a connection's known header is let in without a promise.
  // A hook that answers the request does not call `done`.
  return function authenticate(request, reply, done): void {
    const backendName = (request.params as { backend?: string } | undefined)?.backend;
    const { gatewayWide, keepsToken, perBackend } = paths();
    const path = (backendName && perBackend.get(backendName)) || gatewayWide;
    const header = headersOf(request).authorization;
    const socket = request.raw.socket;
    const known = header === undefined ? undefined : verifiedOnConnection.get(socket);
    if (known !== undefined && known.header === header && verifier.isCurrent(known.principal)) {
      if (admit(request, reply, backendName, path, keepsToken, known)) done();
      return;
    }
    const token = bearerToken(header);
    if (!token) {
      refuse(request, reply, path, new AuthError('missing_token', header ? 'Authorization header is not a bearer token' : 'bearer token required', path.advertised));
      return;
    }
    verifier.verify(token).then(
      (principal) => {
        const verified = shared(header!, token, principal);
        verifiedOnConnection.set(socket, verified);
        if (admit(request, reply, backendName, path, keepsToken, verified)) done();
      },
      (err: unknown) => {
        if (!(err instanceof AuthError)) return done(err as Error);
        refuse(request, reply, path, err.code === 'invalid_token' ? new AuthError(err.code, err.message, path.advertised) : err);
      },
    );
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
