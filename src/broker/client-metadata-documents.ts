/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; MCP 2025-11-25
 * "Authorization" §"Client ID Metadata Documents", the preferred way for a client to register):
 * the client_id is an https URL, and the document served there is the client's metadata.
 *
 * Rules (SPEC §8):
 * - the URL is https with a path, no credentials, no fragment, and written in its normal
 *   form (so no dot segments and one spelling per client); plain http only for a loopback
 *   host while `publicUrl` itself is loopback (development and tests);
 * - it is fetched through the SSRF-guarded client (src/providers/safe-fetch.ts): public
 *   addresses only (loopback only in that development case), no redirects, 5 s, 64 KiB;
 * - the document is a JSON object whose `client_id` equals the URL exactly; it holds no
 *   secret and no `sector_identifier_uri` (which the provider would fetch), and authenticates
 *   with `none` (the default) or `private_key_jwt` — whose `jwks_uri` the provider fetches
 *   through the SSRF guard (outbound-guard.ts: public addresses only, never loopback);
 * - what was fetched is kept in the shared store for its `Cache-Control: max-age` (between
 *   1 minute and 24 hours; 5 minutes without one), a failure for 1 minute, so replicas do not
 *   fetch it again on every request, and a client cannot make the gateway fetch in a loop.
 */
import type { AdapterPayload } from 'oidc-provider';
import type { StateStore } from '../state/store.js';
import { safeFetch, SafeFetchError } from '../providers/safe-fetch.js';
import { ValueKeys } from '../state/value-keys.js';

const MIN_CACHE_S = 60;
const MAX_CACHE_S = 24 * 60 * 60;
const DEFAULT_CACHE_S = 5 * 60;
const FAILURE_CACHE_MS = 60_000;
const MAX_URL = 2048;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Authentication methods that need no shared secret (a document is public). */
const AUTH_METHODS = new Set(['none', 'private_key_jwt']);

export interface ClientMetadataDocumentsOptions {
  /** http and loopback addresses allowed (publicUrl is loopback: development and tests). */
  allowLoopback: boolean;
  /** Why a document was refused (never its content). */
  onRefused?: (clientId: string, reason: string) => void;
}

/** Whether `id` may name a Client ID Metadata Document at all (before anything is fetched). */
export function isClientIdUrl(id: string, allowLoopback: boolean): boolean {
  if (id.length > MAX_URL || !URL.canParse(id)) return false;
  const url = new URL(id);
  if (url.href !== id || url.username || url.password || url.hash || url.pathname === '/') return false;
  if (url.protocol === 'https:') return true;
  return url.protocol === 'http:' && allowLoopback && LOOPBACK.has(url.hostname);
}

/** A refused document: the reason is logged and the client gets `invalid_client`. */
class Refused extends Error {}

export function createClientMetadataDocuments(store: StateStore, options: ClientMetadataDocumentsOptions) {
  const cacheKey = ValueKeys.brokerClientDocument;

  async function fetchDocument(id: string): Promise<{ properties: AdapterPayload; maxAgeS: number }> {
    let res: Response;
    try {
      res = await safeFetch(id, { allowLoopback: options.allowLoopback, headers: { accept: 'application/json' }, timeoutMs: 5_000, maxBodyBytes: 64 * 1024 });
    } catch (err) {
      throw new Refused(err instanceof SafeFetchError ? err.message : 'fetch failed');
    }
    if (res.status !== 200) throw new Refused(`answered HTTP ${res.status}`);
    let doc: unknown;
    try {
      doc = JSON.parse(await res.text());
    } catch {
      throw new Refused('is not JSON');
    }
    return { properties: validate(doc, id), maxAgeS: maxAge(res.headers.get('cache-control')) };
  }

  return {
    /** The client's metadata, or undefined (unknown client: `invalid_client`). */
    async resolve(id: string): Promise<AdapterPayload | undefined> {
      if (!isClientIdUrl(id, options.allowLoopback)) return undefined;
      const cached = await store.getValue(cacheKey(id));
      if (cached !== undefined) {
        const entry = JSON.parse(cached) as { properties?: AdapterPayload };
        return entry.properties;
      }
      try {
        const { properties, maxAgeS } = await fetchDocument(id);
        await store.putValue(cacheKey(id), JSON.stringify({ properties }), maxAgeS * 1000);
        return properties;
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
        options.onRefused?.(id, err.message);
        await store.putValue(cacheKey(id), JSON.stringify({ refused: true }), FAILURE_CACHE_MS);
        return undefined;
      }
    },
  };
}

/** The document as client metadata for oidc-provider, or Refused. */
function validate(doc: unknown, id: string): AdapterPayload {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new Refused('is not a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.client_id !== id) throw new Refused('client_id does not equal the document URL');
  if ('client_secret' in d || 'client_secret_expires_at' in d) throw new Refused('holds a client_secret');
  // oidc-provider would fetch it whenever it loads the client (issue 28 §3); pairwise subjects are off anyway.
  if ('sector_identifier_uri' in d) throw new Refused('holds a sector_identifier_uri');
  const method = d.token_endpoint_auth_method ?? 'none';
  if (typeof method !== 'string' || !AUTH_METHODS.has(method)) throw new Refused('token_endpoint_auth_method must be none or private_key_jwt');
  const uris = d.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || !uris.every((u) => typeof u === 'string')) throw new Refused('has no redirect_uris');
  // Registration-only fields have no meaning here and oidc-provider would refuse some of them.
  const { registration_access_token: _r, registration_client_uri: _u, client_id_issued_at: _i, ...metadata } = d;
  return { ...metadata, token_endpoint_auth_method: method } as AdapterPayload;
}

function maxAge(cacheControl: string | null): number {
  const match = cacheControl ? /(?:^|,)\s*max-age\s*=\s*(\d+)/i.exec(cacheControl) : null;
  const seconds = match ? Number(match[1]) : DEFAULT_CACHE_S;
  return Math.min(MAX_CACHE_S, Math.max(MIN_CACHE_S, seconds));
}
