/**
 * `upstreamAuth.discover: true` (SPEC §3, issue 3): for a backend that is itself an
 * OAuth-protected MCP server, find out where its users authorize, following MCP 2025-11-25
 * "Authorization" (§Authorization Server Discovery):
 *
 * 1. Protected Resource Metadata (RFC 9728): the URL in the `resource_metadata` parameter
 *    of the backend's 401 `WWW-Authenticate` challenge (§5.1), else the well-known URI
 *    `/.well-known/oauth-protected-resource` inserted before the backend's path (§3.1),
 *    then at the root.
 * 2. Its `authorization_servers[0]`, whose metadata comes from RFC 8414
 *    `/.well-known/oauth-authorization-server` (path-inserted), then OpenID Connect
 *    Discovery `/.well-known/openid-configuration` (path-inserted, then appended), and
 *    whose `issuer` must be identical to the URL it was found under (RFC 8414 §3.3).
 * 3. PKCE: `code_challenge_methods_supported` must include `S256`; when the field is
 *    absent MCP 2025-11-25 says clients MUST refuse, which is the default here
 *    (`allowMissingPkceMetadata` relaxes that for servers known to support PKCE anyway).
 * 4. A client: configured, or registered dynamically (RFC 7591) and cached per provider in
 *    the shared store so that every replica uses the same one ({@link registeredClient}),
 *    with the provider's own redirect URI `<publicUrl>/oauth/callback/{provider}`.
 * 5. RFC 9207: the metadata's `issuer` and `authorization_response_iss_parameter_supported`
 *    are returned, for the callback to check the `iss` of the authorization response.
 *
 * Every fetch goes through safe-fetch.ts (https only, public addresses only, no
 * redirects); discovered endpoint URLs are checked by the same rules before being returned,
 * because the browser and the token client will use them.
 */
import type { StateStore } from '../state/store.js';
import { checkUrl, safeFetch, type SafeFetchInit } from './safe-fetch.js';
import type { TokenCipher } from '../state/secrets.js';

export interface DiscoveryOptions {
  /** Permit loopback hosts and `http:` for them (tests, local development). */
  allowLoopback?: boolean;
  /** Per fetch (default 10 s). */
  timeoutMs?: number;
  /** Accept AS metadata without `code_challenge_methods_supported` (default false: refuse). */
  allowMissingPkceMetadata?: boolean;
  /** Name resolution override (tests). */
  resolve?: SafeFetchInit['resolve'];
}

export interface UpstreamAuthMetadata {
  /** RFC 8707 resource indicator to send (the PRM `resource`). */
  resource: string;
  /** Issuer identifier of the authorization server. */
  authorizationServer: string;
  authorizationUrl: string;
  tokenUrl: string;
  revocationUrl?: string;
  registrationUrl?: string;
  /** PRM `scopes_supported`, else the authorization server's. */
  scopesSupported?: string[];
  /** The `scope` of the 401 challenge, when it had one (MCP 2025-11-25 scope selection). */
  challengeScopes?: string[];
  /**
   * RFC 9207 §3 `authorization_response_iss_parameter_supported`: the server puts `iss` in
   * its authorization responses, so a response without one is not from it (mix-up defence).
   */
  issParameterSupported?: boolean;
}

export class DiscoveryError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DiscoveryError';
  }
}

// --------------------------------------------------------- WWW-Authenticate ---

export interface Challenge {
  /** Lower-cased auth scheme, e.g. `bearer`. */
  scheme: string;
  /** Lower-cased parameter names → values (quoted-strings unescaped). */
  params: Record<string, string>;
  token68?: string;
}

const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;
/** `token BWS "=" BWS ( token / quoted-string )`: what tells an auth-param from a token68. */
const AUTH_PARAM_START = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+[ \t]*=[ \t]*["!#$%&'*+\-.^_`|~0-9A-Za-z]/;

/**
 * Parses a `WWW-Authenticate` field value into its challenges (RFC 9110 §11.6.1:
 * `challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]`, several challenges
 * separated by commas). Lenient: malformed parts are skipped, never thrown.
 */
export function parseWwwAuthenticate(header: string): Challenge[] {
  const out: Challenge[] = [];
  let current: Challenge | undefined;
  let i = 0;
  const n = header.length;
  const skip = (chars: RegExp) => {
    while (i < n && chars.test(header[i]!)) i++;
  };
  const token = () => {
    const start = i;
    while (i < n && TCHAR.test(header[i]!)) i++;
    return header.slice(start, i);
  };
  while (i < n) {
    skip(/[\s,]/);
    if (i >= n) break;
    const name = token();
    if (name === '') {
      i++; // not a token character: skip it
      continue;
    }
    skip(/[ \t]/);
    if (current && header[i] === '=') {
      i++;
      skip(/[ \t]/);
      let value: string;
      if (header[i] === '"') {
        i++;
        value = '';
        while (i < n && header[i] !== '"') {
          if (header[i] === '\\' && i + 1 < n) i++;
          value += header[i];
          i++;
        }
        i++; // closing quote
      } else {
        value = token();
      }
      current.params[name.toLowerCase()] ??= value;
      continue;
    }
    current = { scheme: name.toLowerCase(), params: {} };
    out.push(current);
    const t68 = /^([A-Za-z0-9\-._~+/]+=*)[ \t]*(?:,|$)/.exec(header.slice(i));
    if (t68 && !AUTH_PARAM_START.test(header.slice(i))) {
      current.token68 = t68[1];
      i += t68[0].length;
    }
  }
  return out;
}

// ----------------------------------------------------------------- discovery ---

/**
 * Discovers the authorization server of an OAuth-protected MCP backend (see the module
 * comment). `wwwAuthenticate` is the backend's 401 challenge, when there was one.
 */
export async function discoverUpstreamAuth(backendUrl: string, wwwAuthenticate?: string, options: DiscoveryOptions = {}): Promise<UpstreamAuthMetadata> {
  const allowLoopback = options.allowLoopback === true;
  const backend = guard(() => checkUrl(backendUrl, allowLoopback), 'backend URL');
  const challenges = wwwAuthenticate ? parseWwwAuthenticate(wwwAuthenticate) : [];
  const bearer = challenges.find((c) => c.scheme === 'bearer');
  const fromHeader = bearer?.params.resource_metadata ?? challenges.find((c) => c.params.resource_metadata)?.params.resource_metadata;
  const challengeScopes = bearer?.params.scope?.split(' ').filter((s) => s !== '');

  const prmUrls = fromHeader ? [fromHeader] : wellKnownUrls(backend, 'oauth-protected-resource', false);
  const prm = await firstDocument(prmUrls, options, 'protected resource metadata');
  if (!prm) throw new DiscoveryError(`no protected resource metadata found for ${describe(backend)}`);

  const resource = prm.doc.resource;
  if (typeof resource !== 'string' || !resourceCovers(resource, backend)) {
    throw new DiscoveryError(`protected resource metadata at ${describe(prm.url)} names a resource that does not match ${describe(backend)}`);
  }
  const servers = prm.doc.authorization_servers;
  if (!Array.isArray(servers) || typeof servers[0] !== 'string' || servers[0] === '') {
    throw new DiscoveryError(`protected resource metadata at ${describe(prm.url)} lists no authorization_servers`);
  }
  const issuer = servers[0];
  const issuerUrl = guard(() => checkUrl(issuer, allowLoopback), 'authorization server');

  const asUrls = [
    ...wellKnownUrls(issuerUrl, 'oauth-authorization-server', false),
    ...wellKnownUrls(issuerUrl, 'openid-configuration', true),
  ];
  const as = await firstDocument(asUrls, options, 'authorization server metadata');
  if (!as) throw new DiscoveryError(`no authorization server metadata found for ${describe(issuerUrl)}`);
  const meta = as.doc;
  if (typeof meta.issuer !== 'string' || trimSlash(meta.issuer) !== trimSlash(issuer)) {
    throw new DiscoveryError(`authorization server metadata at ${describe(as.url)} has an issuer that differs from ${describe(issuerUrl)}`);
  }
  const methods = meta.code_challenge_methods_supported;
  if (methods === undefined) {
    if (!options.allowMissingPkceMetadata) throw new DiscoveryError(`authorization server ${describe(issuerUrl)} does not advertise PKCE (code_challenge_methods_supported)`);
  } else if (!Array.isArray(methods) || !methods.includes('S256')) {
    throw new DiscoveryError(`authorization server ${describe(issuerUrl)} does not support PKCE S256`);
  }

  const endpoint = (key: string, required: boolean): string | undefined => {
    const value = meta[key];
    if (value === undefined && !required) return undefined;
    if (typeof value !== 'string') throw new DiscoveryError(`authorization server metadata lacks ${key}`);
    return guard(() => checkUrl(value, allowLoopback), key).href;
  };
  const result: UpstreamAuthMetadata = {
    resource,
    authorizationServer: meta.issuer,
    authorizationUrl: endpoint('authorization_endpoint', true)!,
    tokenUrl: endpoint('token_endpoint', true)!,
  };
  const revocationUrl = endpoint('revocation_endpoint', false);
  if (revocationUrl) result.revocationUrl = revocationUrl;
  const registrationUrl = endpoint('registration_endpoint', false);
  if (registrationUrl) result.registrationUrl = registrationUrl;
  const scopes = stringArray(prm.doc.scopes_supported) ?? stringArray(meta.scopes_supported);
  if (scopes) result.scopesSupported = scopes;
  if (challengeScopes?.length) result.challengeScopes = challengeScopes;
  if (meta.authorization_response_iss_parameter_supported === true) result.issParameterSupported = true;
  return result;
}

/**
 * Well-known URIs for `base` (RFC 8615): path-inserted first (RFC 8414 §3.1, RFC 9728
 * §3.1), then — for `openid-configuration` — appended to the path (OIDC Discovery §4),
 * and the root form when the path is empty (or, for protected resources, as a fallback).
 */
function wellKnownUrls(base: URL, name: string, appendForm: boolean): string[] {
  const path = base.pathname.replace(/\/+$/, '');
  const urls: string[] = [];
  if (path) {
    urls.push(`${base.origin}/.well-known/${name}${path}`);
    if (appendForm) urls.push(`${base.origin}${path}/.well-known/${name}`);
    if (name === 'oauth-protected-resource') urls.push(`${base.origin}/.well-known/${name}`);
  } else {
    urls.push(`${base.origin}/.well-known/${name}`);
  }
  return urls;
}

/**
 * The PRM `resource` must identify the backend (RFC 9728 §3.3). Servers commonly name
 * their origin or a parent path of the MCP endpoint, so — as the MCP SDK does — the same
 * origin with a path that is the backend's path or a parent of it is accepted.
 */
function resourceCovers(resource: string, backend: URL): boolean {
  let r: URL;
  try {
    r = new URL(resource);
  } catch {
    return false;
  }
  if (r.origin !== backend.origin || r.search || r.hash) return false;
  const rp = r.pathname.replace(/\/+$/, '');
  const bp = backend.pathname.replace(/\/+$/, '');
  return bp === rp || bp.startsWith(`${rp}/`);
}

/** The first URL that answers 200 with a JSON object; 4xx means "try the next". */
async function firstDocument(urls: string[], options: DiscoveryOptions, what: string): Promise<{ url: string; doc: Record<string, unknown> } | undefined> {
  for (const url of urls) {
    const res = await guardAsync(() => safeFetch(url, fetchInit(options, { headers: { accept: 'application/json' } })), what);
    if (res.status >= 400 && res.status < 500) continue;
    if (res.status !== 200) throw new DiscoveryError(`${what} at ${describe(url)} answered HTTP ${res.status}`);
    const doc = await res.json().catch(() => undefined);
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new DiscoveryError(`${what} at ${describe(url)} is not a JSON object`);
    return { url, doc: doc as Record<string, unknown> };
  }
  return undefined;
}

// -------------------------------------------------------------- registration ---

export interface RegisteredClient {
  clientId: string;
  clientSecret?: string;
}

/**
 * Dynamic Client Registration (RFC 7591 §3.1): a client for the authorization code grant
 * with refresh tokens and this redirect URI. It asks to be a public client
 * (`token_endpoint_auth_method: none`, PKCE protects the code); if the server issues a
 * secret anyway it is returned (and then used with client_secret_basic).
 */
export async function registerClient(
  registrationUrl: string,
  o: { redirectUri: string; clientName: string },
  options: DiscoveryOptions = {},
): Promise<RegisteredClient & { clientSecretExpiresAt?: number }> {
  const body = {
    client_name: o.clientName,
    redirect_uris: [o.redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
  const res = await guardAsync(
    () =>
      safeFetch(
        registrationUrl,
        fetchInit(options, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) }),
      ),
    'client registration',
  );
  const doc = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
  if (res.status !== 201 && res.status !== 200) {
    const code = typeof doc?.error === 'string' && /^[a-z_]{1,64}$/.test(doc.error) ? doc.error : undefined;
    throw new DiscoveryError(`client registration at ${describe(registrationUrl)} refused: HTTP ${res.status}${code ? ` ${code}` : ''}`);
  }
  if (typeof doc?.client_id !== 'string' || doc.client_id === '') {
    throw new DiscoveryError(`client registration at ${describe(registrationUrl)} returned no client_id`);
  }
  const out: RegisteredClient & { clientSecretExpiresAt?: number } = { clientId: doc.client_id };
  if (typeof doc.client_secret === 'string' && doc.client_secret !== '') out.clientSecret = doc.client_secret;
  if (typeof doc.client_secret_expires_at === 'number' && doc.client_secret_expires_at > 0) out.clientSecretExpiresAt = doc.client_secret_expires_at * 1000;
  return out;
}

/** How long a registered client is reused without a secret expiry (it is re-registered after). */
const CLIENT_CACHE_MS = 90 * 24 * 60 * 60 * 1000;

interface CachedClient {
  registrationUrl: string;
  redirectUri: string;
  clientId: string;
  /** Sealed with the cipher, context `client:<provider>`. */
  sealedSecret?: string;
}

export interface RegisteredClientOptions extends DiscoveryOptions {
  /** Default `Switchboard`. */
  clientName?: string;
  /** Needed only when the server issues a client secret: it is stored sealed. */
  cipher?: TokenCipher;
}

/**
 * The client registered for `provider`, registering one when none is cached (key
 * `client:<provider>` in the shared store). Two replicas registering at the same moment
 * both register, but only the first cache write wins and both use that client (the other
 * registration is simply never used). A cached client for a different registration
 * endpoint or redirect URI is replaced.
 */
export async function registeredClient(
  store: StateStore,
  provider: string,
  registrationUrl: string,
  redirectUri: string,
  options: RegisteredClientOptions = {},
): Promise<RegisteredClient> {
  if (!/^[a-z0-9-]{1,64}$/.test(provider)) throw new DiscoveryError('provider must match [a-z0-9-]+');
  const key = `client:${provider}`;
  const cached = readCached(await store.getValue(key), registrationUrl, redirectUri, key, options.cipher);
  if (cached) return cached;

  const registered = await registerClient(registrationUrl, { redirectUri, clientName: options.clientName ?? 'Switchboard' }, options);
  const record: CachedClient = { registrationUrl, redirectUri, clientId: registered.clientId };
  if (registered.clientSecret !== undefined) {
    if (!options.cipher) throw new DiscoveryError('client registration returned a client secret, but no cipher was given to store it');
    record.sealedSecret = options.cipher.seal(registered.clientSecret, key);
  }
  const ttl = registered.clientSecretExpiresAt !== undefined ? Math.max(1_000, Math.min(CLIENT_CACHE_MS, registered.clientSecretExpiresAt - Date.now() - 60_000)) : CLIENT_CACHE_MS;
  const value = JSON.stringify(record);
  if (await store.putValueIfAbsent(key, value, ttl)) return toClient(record, key, options.cipher)!;
  // Someone cached one meanwhile: use theirs when it fits, else replace it with ours.
  const theirs = readCached(await store.getValue(key), registrationUrl, redirectUri, key, options.cipher);
  if (theirs) return theirs;
  await store.putValue(key, value, ttl);
  return toClient(record, key, options.cipher)!;
}

/** Drops the cached client (e.g. after the server answered `invalid_client`). */
export async function forgetRegisteredClient(store: StateStore, provider: string): Promise<void> {
  await store.deleteValue(`client:${provider}`);
}

function readCached(raw: string | undefined, registrationUrl: string, redirectUri: string, key: string, cipher: TokenCipher | undefined): RegisteredClient | undefined {
  if (raw === undefined) return undefined;
  try {
    const record = JSON.parse(raw) as CachedClient;
    if (record.registrationUrl !== registrationUrl || record.redirectUri !== redirectUri || typeof record.clientId !== 'string') return undefined;
    return toClient(record, key, cipher);
  } catch {
    return undefined;
  }
}

function toClient(record: CachedClient, key: string, cipher: TokenCipher | undefined): RegisteredClient | undefined {
  if (record.sealedSecret === undefined) return { clientId: record.clientId };
  const secret = cipher?.open(record.sealedSecret, key);
  return secret === undefined ? undefined : { clientId: record.clientId, clientSecret: secret };
}

// ------------------------------------------------------------------- helpers ---

function fetchInit(options: DiscoveryOptions, init: SafeFetchInit): SafeFetchInit {
  const out: SafeFetchInit = { ...init, allowLoopback: options.allowLoopback === true };
  if (options.timeoutMs !== undefined) out.timeoutMs = options.timeoutMs;
  if (options.resolve) out.resolve = options.resolve;
  return out;
}

function guard<T>(fn: () => T, what: string): T {
  try {
    return fn();
  } catch (err) {
    throw new DiscoveryError(`${what}: ${(err as Error).message}`, { cause: err });
  }
}

async function guardAsync<T>(fn: () => Promise<T>, what: string): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof DiscoveryError) throw err;
    throw new DiscoveryError(`${what}: ${(err as Error).message}`, { cause: err });
  }
}

function stringArray(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : undefined;
}

function trimSlash(url: string): string {
  return url.endsWith('/') ? url.slice(0, -1) : url;
}

function describe(url: string | URL): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}
