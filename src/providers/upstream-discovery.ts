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
 *    the shared store so that every replica uses the same one (client-registration.ts),
 *    with the provider's own redirect URI `<publicUrl>/oauth/callback/{provider}`.
 * 5. RFC 9207: the metadata's `issuer` and `authorization_response_iss_parameter_supported`
 *    are returned, for the callback to check the `iss` of the authorization response.
 *
 * Every fetch goes through safe-fetch.ts (https only, public addresses only, no
 * redirects; discovery-fetch.ts); discovered endpoint URLs are checked by the same rules before being returned,
 * because the browser and the token client will use them.
 */
import { checkUrl } from './safe-fetch.js';
import { describeUrl, DiscoveryError, discoveryFetch, type DiscoveryOptions } from './discovery-fetch.js';
import { parseWwwAuthenticate } from './www-authenticate.js';
import { DPOP_ALG } from '../backends/dpop.js';

export interface UpstreamAuthMetadata {
  /** RFC 8707 resource indicator to send (the PRM `resource`); absent for a 2025-03-26 server without PRM. */
  resource?: string;
  /** Issuer identifier of the authorization server. */
  authorizationServer: string;
  authorizationUrl: string;
  tokenUrl: string;
  revocationUrl?: string;
  registrationUrl?: string;
  /** PRM `scopes_supported` (MCP 2025-11-25 scope selection: used when the challenge names none). */
  scopesSupported?: string[];
  /** The `scope` of the 401 challenge, when it had one (MCP 2025-11-25 scope selection). */
  challengeScopes?: string[];
  /**
   * RFC 9207 §3 `authorization_response_iss_parameter_supported`: the server puts `iss` in
   * its authorization responses, so a response without one is not from it (mix-up defence).
   */
  issParameterSupported?: boolean;
  /** The authorization server's own `scopes_supported` (RFC 8414) lists `offline_access`: it issues refresh tokens for it (SEP-2207). */
  offlineAccess?: boolean;
  /** RFC 8414 `token_endpoint_auth_methods_supported`, when the metadata lists them. */
  tokenEndpointAuthMethods?: string[];
  /** `client_id_metadata_document_supported: true` (MCP 2025-11-25, Client ID Metadata Documents). */
  clientIdMetadataDocuments?: boolean;
  /** RFC 8414 `dpop_signing_alg_values_supported` of the authorization server (RFC 9449 §5.1), when listed. */
  dpopAlgs?: string[];
  /**
   * DPoP is to be used (RFC 9449; issue 42 cause 12): the authorization server or the backend's
   * metadata lists ES256 in `dpop_signing_alg_values_supported` (and neither lists algorithms
   * without it), or the backend requires bound tokens (`dpop_bound_access_tokens_required`).
   */
  dpop?: { boundTokensRequired: boolean };
  /** How the server was found: `prm` (RFC 9728), or the 2025-03-26 fallbacks `origin-metadata` and `default-endpoints`. */
  foundBy: 'prm' | 'origin-metadata' | 'default-endpoints';
}

/**
 * Discovers the authorization server of an OAuth-protected MCP backend (see the module
 * comment). `wwwAuthenticate` is the backend's 401 challenge, when there was one.
 */
export async function discoverUpstreamAuth(backendUrl: string, wwwAuthenticate?: string, options: DiscoveryOptions = {}): Promise<UpstreamAuthMetadata> {
  const allowLoopback = options.allowLoopback === true;
  const backend = guard(() => checkUrl(backendUrl, allowLoopback), 'backend URL');
  const challenge = readChallenge(wwwAuthenticate);
  const prm = await firstDocument(prmUrls(backend, challenge), options, 'protected resource metadata');
  const found = prm ? await fromProtectedResource(backend, prm, options) : await legacyServer(backend, options);
  if (challenge.scopes?.length) found.challengeScopes = challenge.scopes;
  return found;
}

/**
 * The authorization server the backend's protected resource metadata names now
 * (`authorization_servers[0]`), read afresh from the `resource_metadata` of `wwwAuthenticate`
 * or the well-known URLs; undefined for a backend without such metadata (2025-03-26). What
 * a client compares with the issuer it linked at to notice that the backend moved to another
 * authorization server (SEP-2352; provider-endpoints.ts).
 */
export async function currentAuthorizationServer(backendUrl: string, wwwAuthenticate: string | undefined, options: DiscoveryOptions = {}): Promise<string | undefined> {
  const backend = guard(() => checkUrl(backendUrl, options.allowLoopback === true), 'backend URL');
  const prm = await firstDocument(prmUrls(backend, readChallenge(wwwAuthenticate)), options, 'protected resource metadata');
  return prm ? authorizationServerOf(backend, prm) : undefined;
}

/** Where the PRM is looked for: the challenge's `resource_metadata` first (RFC 9728 §5.1), then the well-known URLs. */
function prmUrls(backend: URL, challenge: { resourceMetadata?: string }): string[] {
  return [...new Set([...(challenge.resourceMetadata ? [challenge.resourceMetadata] : []), ...wellKnownUrls(backend, 'oauth-protected-resource', false)])];
}

/** The PRM's `authorization_servers[0]`, once its `resource` is found to identify the backend. */
function authorizationServerOf(backend: URL, prm: FoundDocument): string {
  const resource = prm.doc.resource;
  if (typeof resource !== 'string' || !resourceCovers(resource, backend)) {
    throw new DiscoveryError(`protected resource metadata at ${describeUrl(prm.url)} names a resource that does not match ${describeUrl(backend)}`);
  }
  const servers = prm.doc.authorization_servers;
  if (!Array.isArray(servers) || typeof servers[0] !== 'string' || servers[0] === '') {
    throw new DiscoveryError(`protected resource metadata at ${describeUrl(prm.url)} lists no authorization_servers`);
  }
  return servers[0];
}

/** The `resource_metadata` and `scope` of the Bearer challenge (RFC 9728 §5.1; MCP 2025-11-25 scope selection). */
function readChallenge(header: string | undefined): { resourceMetadata?: string; scopes?: string[] } {
  const challenges = header ? parseWwwAuthenticate(header) : [];
  // A backend that wants DPoP-bound tokens challenges with the DPoP scheme (RFC 9449 §7.1).
  const bearer = challenges.find((c) => c.scheme === 'bearer') ?? challenges.find((c) => c.scheme === 'dpop');
  const resourceMetadata = bearer?.params.resource_metadata ?? challenges.find((c) => c.params.resource_metadata)?.params.resource_metadata;
  const scopes = bearer?.params.scope?.split(' ').filter((s) => s !== '');
  return { ...(resourceMetadata ? { resourceMetadata } : {}), ...(scopes ? { scopes } : {}) };
}

/** MCP 2025-06-18 and later: the PRM names the resource and its authorization server, whose metadata names the endpoints. */
async function fromProtectedResource(backend: URL, prm: FoundDocument, options: DiscoveryOptions): Promise<UpstreamAuthMetadata> {
  const issuer = authorizationServerOf(backend, prm);
  const issuerUrl = guard(() => checkUrl(issuer, options.allowLoopback === true), 'authorization server');
  const asUrls = [...wellKnownUrls(issuerUrl, 'oauth-authorization-server', false), ...wellKnownUrls(issuerUrl, 'openid-configuration', true)];
  const as = await firstDocument(asUrls, options, 'authorization server metadata');
  if (!as) throw new DiscoveryError(`no authorization server metadata found for ${describeUrl(issuerUrl)}`);
  if (typeof as.doc.issuer !== 'string' || trimSlash(as.doc.issuer) !== trimSlash(issuer)) {
    throw new DiscoveryError(`authorization server metadata at ${describeUrl(as.url)} has an issuer that differs from ${describeUrl(issuerUrl)}`);
  }
  const result = fromServerMetadata(as, issuerUrl, options, 'prm');
  result.resource = prm.doc.resource as string;
  const scopes = stringArray(prm.doc.scopes_supported);
  if (scopes) result.scopesSupported = scopes;
  const dpop = dpopOf(result.dpopAlgs, stringArray(prm.doc.dpop_signing_alg_values_supported), prm.doc.dpop_bound_access_tokens_required === true);
  if (dpop) result.dpop = dpop;
  else delete result.dpop;
  return result;
}

/** The ES256 proofs the gateway signs (backends/dpop.ts) are taken where every list offered names ES256; bound tokens required is a signal of its own. */
function dpopOf(asAlgs: string[] | undefined, prmAlgs: string[] | undefined, boundTokensRequired: boolean): { boundTokensRequired: boolean } | undefined {
  const lists = [asAlgs, prmAlgs].filter((l): l is string[] => l !== undefined && l.length > 0);
  if (lists.length === 0 ? !boundTokensRequired : !lists.every((l) => l.includes(DPOP_ALG))) return undefined;
  return { boundTokensRequired };
}

/**
 * MCP 2025-03-26 "Authorization" §2.3: a server without protected resource metadata is its
 * own authorization server at its origin (the path is discarded) — RFC 8414 metadata at
 * `<origin>/.well-known/oauth-authorization-server`, else the default endpoints
 * `/authorize`, `/token` and `/register` there. Its metadata's issuer must be on that origin.
 */
async function legacyServer(backend: URL, options: DiscoveryOptions): Promise<UpstreamAuthMetadata> {
  const origin = new URL(backend.origin);
  const as = await firstDocument([`${backend.origin}/.well-known/oauth-authorization-server`], options, 'authorization server metadata');
  if (as) {
    const issuer = typeof as.doc.issuer === 'string' ? guard(() => new URL(as.doc.issuer as string), 'issuer') : undefined;
    if (issuer?.origin !== backend.origin) throw new DiscoveryError(`authorization server metadata at ${describeUrl(as.url)} has an issuer outside ${backend.origin}`);
    return fromServerMetadata(as, origin, options, 'origin-metadata');
  }
  return {
    authorizationServer: backend.origin,
    authorizationUrl: `${backend.origin}/authorize`,
    tokenUrl: `${backend.origin}/token`,
    registrationUrl: `${backend.origin}/register`,
    foundBy: 'default-endpoints',
  };
}

/** The scope that asks for a refresh token (OpenID Connect Core §11; MCP SEP-2207). */
export const OFFLINE_ACCESS = 'offline_access';

/** What RFC 8414 metadata says: endpoints (checked by the SSRF rules), PKCE, auth methods, CIMD, `offline_access`, RFC 9207. */
function fromServerMetadata(as: FoundDocument, issuerUrl: URL, options: DiscoveryOptions, foundBy: UpstreamAuthMetadata['foundBy']): UpstreamAuthMetadata {
  const meta = as.doc;
  const methods = meta.code_challenge_methods_supported;
  if (methods === undefined) {
    if (!options.allowMissingPkceMetadata) throw new DiscoveryError(`authorization server ${describeUrl(issuerUrl)} does not advertise PKCE (code_challenge_methods_supported)`);
  } else if (!Array.isArray(methods) || !methods.includes('S256')) {
    throw new DiscoveryError(`authorization server ${describeUrl(issuerUrl)} does not support PKCE S256`);
  }
  const endpoint = (key: string, required: boolean): string | undefined => {
    const value = meta[key];
    if (value === undefined && !required) return undefined;
    if (typeof value !== 'string') throw new DiscoveryError(`authorization server metadata lacks ${key}`);
    return guard(() => checkUrl(value, options.allowLoopback === true), key).href;
  };
  const result: UpstreamAuthMetadata = {
    authorizationServer: meta.issuer as string,
    authorizationUrl: endpoint('authorization_endpoint', true)!,
    tokenUrl: endpoint('token_endpoint', true)!,
    foundBy,
  };
  const revocationUrl = endpoint('revocation_endpoint', false);
  if (revocationUrl) result.revocationUrl = revocationUrl;
  const registrationUrl = endpoint('registration_endpoint', false);
  if (registrationUrl) result.registrationUrl = registrationUrl;
  const authMethods = stringArray(meta.token_endpoint_auth_methods_supported);
  if (authMethods) result.tokenEndpointAuthMethods = authMethods;
  if (meta.client_id_metadata_document_supported === true) result.clientIdMetadataDocuments = true;
  if (stringArray(meta.scopes_supported)?.includes(OFFLINE_ACCESS)) result.offlineAccess = true;
  if (meta.authorization_response_iss_parameter_supported === true) result.issParameterSupported = true;
  const dpopAlgs = stringArray(meta.dpop_signing_alg_values_supported);
  if (dpopAlgs) {
    result.dpopAlgs = dpopAlgs;
    const dpop = dpopOf(dpopAlgs, undefined, false);
    if (dpop) result.dpop = dpop;
  }
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
interface FoundDocument {
  url: string;
  doc: Record<string, unknown>;
}

async function firstDocument(urls: string[], options: DiscoveryOptions, what: string): Promise<FoundDocument | undefined> {
  for (const url of urls) {
    const res = await discoveryFetch(url, options, { headers: { accept: 'application/json' } }, what);
    if (res.status >= 400 && res.status < 500) continue;
    if (res.status !== 200) throw new DiscoveryError(`${what} at ${describeUrl(url)} answered HTTP ${res.status}`);
    const doc = await res.json().catch(() => undefined);
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new DiscoveryError(`${what} at ${describeUrl(url)} is not a JSON object`);
    return { url, doc: doc as Record<string, unknown> };
  }
  return undefined;
}

function guard<T>(fn: () => T, what: string): T {
  try {
    return fn();
  } catch (err) {
    throw new DiscoveryError(`${what}: ${(err as Error).message}`, { cause: err });
  }
}

function stringArray(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : undefined;
}

export function trimSlash(url: string): string {
  return url.endsWith('/') ? url.slice(0, -1) : url;
}
