/**
 * Dynamic Client Registration (RFC 7591) for `upstreamAuth.discover` backends whose
 * authorization server offers it and for which no `clientId` is configured (SPEC §3; MCP
 * 2025-11-25 "Authorization", §Dynamic Client Registration): a public client for the
 * authorization code grant with the provider's own redirect URI
 * `<publicUrl>/oauth/callback/{provider}` (redirect-uri.ts), cached per provider in the
 * shared store so that every replica uses the same one; it says its `application_type`
 * (SEP-837). The registration request goes
 * through the SSRF guard like every discovery fetch (discovery-fetch.ts).
 */
import type { StateStore } from '../state/store.js';
import type { TokenCipher } from '../state/secrets.js';
import { ValueKeys } from '../state/value-keys.js';
import { describeUrl, DiscoveryError, discoveryFetch, type DiscoveryOptions } from './discovery-fetch.js';

export interface RegisteredClient {
  clientId: string;
  clientSecret?: string;
  /** The `token_endpoint_auth_method` the server registered (RFC 7591 §3.2.1), when it said. */
  tokenEndpointAuthMethod?: string;
}

/**
 * The OpenID Connect `application_type` (Dynamic Client Registration 1.0 §2) of a client
 * redirected to `redirectUri`, which MCP 2026-07-28 clients MUST send (SEP-837): `web` for the
 * gateway as deployed (an https `publicUrl`); `native` for one running on a loopback address
 * in development, whose `http://127.0.0.1` or `http://localhost` redirect URI an authorization
 * server accepts only from a native client (RFC 8252 §7.3) — as the v2 SDK's client derives it.
 */
export function applicationType(redirectUri: string): 'web' | 'native' {
  let url: URL;
  try {
    url = new URL(redirectUri);
  } catch {
    return 'web';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'native';
  return /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i.test(url.hostname) ? 'native' : 'web';
}

/**
 * Dynamic Client Registration (RFC 7591 §3.1): a client for the authorization code grant
 * with refresh tokens and this redirect URI, of the `application_type` it names. It asks to be a public client
 * (`token_endpoint_auth_method: none`, PKCE protects the code); if the server issues a
 * secret anyway it is returned, with the method the server assigned (many do: a
 * confidential client with `client_secret_post` or `_basic`), for the token requests to use.
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
    application_type: applicationType(o.redirectUri),
  };
  const init = { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) };
  const res = await discoveryFetch(registrationUrl, options, init, 'client registration');
  const doc = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
  if (res.status !== 201 && res.status !== 200) {
    const code = typeof doc?.error === 'string' && /^[a-z_]{1,64}$/.test(doc.error) ? doc.error : undefined;
    throw new DiscoveryError(`client registration at ${describeUrl(registrationUrl)} refused: HTTP ${res.status}${code ? ` ${code}` : ''}`);
  }
  if (typeof doc?.client_id !== 'string' || doc.client_id === '') {
    throw new DiscoveryError(`client registration at ${describeUrl(registrationUrl)} returned no client_id`);
  }
  const out: RegisteredClient & { clientSecretExpiresAt?: number } = { clientId: doc.client_id };
  if (typeof doc.client_secret === 'string' && doc.client_secret !== '') out.clientSecret = doc.client_secret;
  if (typeof doc.token_endpoint_auth_method === 'string' && /^[a-z_]{1,64}$/.test(doc.token_endpoint_auth_method)) out.tokenEndpointAuthMethod = doc.token_endpoint_auth_method;
  if (typeof doc.client_secret_expires_at === 'number' && doc.client_secret_expires_at > 0) out.clientSecretExpiresAt = Math.floor(doc.client_secret_expires_at * 1000); // whole ms: the cache TTL is derived from it
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
  tokenEndpointAuthMethod?: string;
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
  const key = ValueKeys.providerClient(provider);
  const cached = readCached(await store.getValue(key), registrationUrl, redirectUri, key, options.cipher);
  if (cached) return cached;

  const registered = await registerClient(registrationUrl, { redirectUri, clientName: options.clientName ?? 'Switchboard' }, options);
  const record: CachedClient = { registrationUrl, redirectUri, clientId: registered.clientId };
  if (registered.tokenEndpointAuthMethod !== undefined) record.tokenEndpointAuthMethod = registered.tokenEndpointAuthMethod;
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
  await store.deleteValue(ValueKeys.providerClient(provider));
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
  const client: RegisteredClient = { clientId: record.clientId };
  if (typeof record.tokenEndpointAuthMethod === 'string') client.tokenEndpointAuthMethod = record.tokenEndpointAuthMethod;
  if (record.sealedSecret === undefined) return client;
  const secret = cipher?.open(record.sealedSecret, key);
  return secret === undefined ? undefined : { ...client, clientSecret: secret };
}
