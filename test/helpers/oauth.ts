/**
 * Starts the real OAuth/OIDC test server (test/fixtures/oauth-server-process.ts)
 * as a child process and fetches tokens from it over HTTP.
 *
 * Why: token validation in the gateway must be exercised end to end —
 * discovery, JWKS download, signature, iss/aud/exp checks — against keys the
 * test process never sees. Tests ask the server for tokens with the claims
 * they need (`token({...})`) instead of signing anything themselves.
 */
import { fileURLToPath } from 'node:url';
import { spawnChild, describeLogs } from './child.js';
import { nodeEntry } from './node-entry.js';

/** What {@link OAuthHandle.token} can put into a token. */
export interface TokenOptions {
  sub?: string;
  aud?: string | string[];
  /** Space-separated scopes, e.g. `'mcp:read mcp:write'`. */
  scope?: string;
  /** Lifetime in seconds from now; negative gives an already-expired token. Default 3600. */
  expiresIn?: number;
  /** Extra claims merged into the payload last (may override standard ones, e.g. `iss`). */
  claims?: Record<string, unknown>;
  /** Signing algorithm; both keys are in the JWKS. Default RS256. */
  alg?: 'RS256' | 'ES256';
}

/** A cookie in the shape Playwright's `BrowserContext.addCookies` takes. */
export interface BrowserCookie {
  name: string;
  value: string;
  url: string;
}

/** A running OAuth server. */
export interface OAuthHandle {
  /** Issuer URL, e.g. `http://127.0.0.1:40123` (no trailing slash); equals `iss` in its tokens. */
  issuer: string;
  /** JWKS URL taken from the discovery document. */
  jwksUri: string;
  /** Token endpoint URL taken from the discovery document. */
  tokenEndpoint: string;
  /** Authorization endpoint URL taken from the discovery document (redirects back at once). */
  authorizationEndpoint: string;
  /**
   * A cookie that makes this server's /authorize sign the browser in as `sub`: the code it
   * issues yields an id_token and access token with that `sub`. For Playwright:
   * `context.addCookies([oauth.subjectCookie('alice')])`. A `login_hint` query parameter at
   * /authorize takes precedence. Cookies ignore ports, so the name carries this server's port.
   */
  subjectCookie(sub: string): BrowserCookie;
  /** A cookie that makes /authorize answer `error=<error>` (e.g. `access_denied`) with the `state`. */
  errorCookie(error: string): BrowserCookie;
  /** A cookie that adds these claims to the tokens issued for the browser's code (e.g. a tenant claim). */
  claimsCookie(claims: Record<string, unknown>): BrowserCookie;
  /** Obtains a signed access token (client_credentials grant) carrying the requested claims. */
  token(opts?: TokenOptions): Promise<string>;
  /** SIGTERM (then SIGKILL) the server. Idempotent. */
  stop(): Promise<void>;
}

const FIXTURE = fileURLToPath(new URL('../fixtures/oauth-server-process.ts', import.meta.url));
/** Repository root: `--import tsx` is resolved from the child's cwd. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const READY_TIMEOUT_MS = 20_000;
const HTTP_TIMEOUT_MS = 5_000;

/** What {@link startOAuthServer} may be asked for. */
export interface OAuthServerOptions {
  /**
   * A server of the test's own, never the run's shared one: for a test that stops it, or
   * that needs two issuers that are not the same.
   */
  own?: boolean;
}

/** Whether this process has had the run's shared OAuth server already. */
let sharedHandedOut = false;

/**
 * The OAuth server a test uses. Under `npm test`, the first one a test file asks for is the
 * run's shared one (SB_TEST_ISSUER, started by scripts/run-tests.sh; issue 43: starting it cost
 * 1.4 s of CPU in each of 109 files). It holds nothing a test could leave behind for another:
 * a token's claims come with its request, and the browser cookies that choose a user are per
 * browser and name the port. Its handle's `stop` leaves it running. Every further one the file
 * asks for (a second issuer, a third party's server) is its own, on a free port, so two
 * servers a test tells apart are never the same; so is one asked for with `own`.
 */
export async function startOAuthServer(options: OAuthServerOptions = {}): Promise<OAuthHandle> {
  const shared = process.env.SB_TEST_ISSUER;
  if (shared && !options.own && !sharedHandedOut) {
    sharedHandedOut = true;
    return handleFor(shared, Number(new URL(shared).port), () => `(the run's shared OAuth server, ${shared}: its output is in the npm test output)`, async () => undefined);
  }
  return startOwnOAuthServer();
}

/** Starts the OAuth server on a free loopback port and reads its discovery document. */
async function startOwnOAuthServer(): Promise<OAuthHandle> {
  const child = await spawnChild({
    name: 'oauth server',
    command: process.execPath,
    args: nodeEntry(FIXTURE),
    cwd: ROOT,
    env: { OAUTH_SERVER_PORT: '0', OAUTH_SERVER_WATCH_STDIN: '1' },
    stdin: 'pipe',
    readyTimeoutMs: READY_TIMEOUT_MS,
    ready: (line, stream) => stream === 'stdout' && parseReadyLine(line) !== undefined,
  });
  try {
    const { issuer, port } = parseReadyLine(child.readyLine ?? '')!;
    return await handleFor(issuer, port, child.logs, () => child.stop());
  } catch (err) {
    await child.stop().catch(() => undefined);
    throw new Error(`oauth server started but is unusable: ${(err as Error).message}\n${describeLogs('oauth server', child.logs())}`);
  }
}

/** A handle on the server at `issuer`, after reading its discovery document. */
async function handleFor(issuer: string, port: number, logs: () => string, stop: () => Promise<void>): Promise<OAuthHandle> {
  const discovery = await getJson(`${issuer}/.well-known/openid-configuration`);
  const jwksUri = requireString(discovery, 'jwks_uri');
  const tokenEndpoint = requireString(discovery, 'token_endpoint');
  const authorizationEndpoint = requireString(discovery, 'authorization_endpoint');
  const cookie = (name: string, value: string): BrowserCookie => ({ name: `${name}_${port}`, value: encodeURIComponent(value), url: issuer });
  if (discovery.issuer !== issuer) {
    throw new Error(`discovery issuer ${String(discovery.issuer)} differs from announced issuer ${issuer}`);
  }
  return {
    issuer,
    jwksUri,
    tokenEndpoint,
    authorizationEndpoint,
    subjectCookie: (sub) => cookie('mock_sub', sub),
    errorCookie: (error) => cookie('mock_error', error),
    claimsCookie: (claims) => cookie('mock_claims', JSON.stringify(claims)),
    token: (opts = {}) => requestToken(tokenEndpoint, opts, logs),
    stop,
  };
}

/**
 * Builds an unsecured JWT (`alg: none`, empty signature: `header.payload.`).
 * For negative tests only: a verifier must reject it.
 */
export function unsignedToken(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
}

function parseReadyLine(line: string): { issuer: string; port: number } | undefined {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value === 'object' && value !== null) {
      const { issuer, port } = value as Record<string, unknown>;
      if (typeof issuer === 'string' && typeof port === 'number') return { issuer, port };
    }
  } catch {
    // not the ready line
  }
  return undefined;
}

async function requestToken(tokenEndpoint: string, opts: TokenOptions, logs: () => string): Promise<string> {
  const body: Record<string, unknown> = { grant_type: 'client_credentials' };
  if (opts.sub !== undefined) body.sub = opts.sub;
  if (opts.aud !== undefined) body.aud = opts.aud;
  if (opts.scope !== undefined) body.scope = opts.scope;
  if (opts.expiresIn !== undefined) body.expires_in = opts.expiresIn;
  if (opts.claims !== undefined) body.claims = opts.claims;
  if (opts.alg !== undefined) body.alg = opts.alg;

  const res = await fetchOnce(tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) {
    throw new Error(`token request failed: HTTP ${res.status} ${text}\n${describeLogs('oauth server', logs())}`);
  }
  const json = JSON.parse(text) as Record<string, unknown>;
  return requireString(json, 'access_token');
}

/** Failures of a connection the request may never have reached the server on. */
const STALE_CONNECTION = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/**
 * `fetch`, sent again once when the pooled keep-alive connection it went out on turned out to
 * be closed by the server (undici does not resend a POST by itself). A test process asks the
 * run's shared OAuth server for tokens seconds apart, so its idle connection can meet the
 * server's keep-alive close; a token request is safe to repeat. Any other failure is thrown
 * naming its cause, not as a bare "fetch failed".
 */
async function fetchOnce(url: string, init: RequestInit): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetch(url, { ...init, signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      if (attempt === 1 && cause?.code && STALE_CONNECTION.has(cause.code)) continue;
      throw new Error(`${init.method ?? 'GET'} ${url}: ${(err as Error).message}${cause ? ` (${cause.code ?? ''} ${cause.message ?? ''})` : ''}`, { cause: err });
    }
  }
}

async function getJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetchOnce(url, {});
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

function requireString(obj: Record<string, unknown>, key: string): string {
  const value = obj[key];
  if (typeof value !== 'string' || value === '') throw new Error(`response has no string '${key}': ${JSON.stringify(obj)}`);
  return value;
}
