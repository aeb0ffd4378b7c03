/**
 * The SSRF guard on oidc-provider's own HTTP client (issue 28 §3; OWASP SSRF Prevention Cheat
 * Sheet; MCP 2025-11-25 "Security Best Practices" §"Server-Side Request Forgery").
 *
 * oidc-provider fetches URLs taken from client metadata — `jwks_uri` when a `private_key_jwt`
 * client authenticates, `sector_identifier_uri` when a client is loaded — with `got`, not
 * through src/providers/safe-fetch.ts. Its `httpOptions(url)` hook is called before each of
 * those requests; this one applies safe-fetch's rules to them:
 * - the URL's form (https only, no credentials, no non-public IP literal) — `checkUrl`,
 *   which throws, so the request is never made;
 * - every address a host name resolves to must be public (`addressRefusal`), checked in the
 *   lookup the connection itself uses, so a name that re-resolves elsewhere (DNS rebinding)
 *   cannot slip past;
 * - loopback is never allowed here, not even in development: no broker feature needs the
 *   provider to fetch from loopback (a metadata document on loopback names its keys inline,
 *   `jwks`, instead of a `jwks_uri`);
 * - 5 s for the whole exchange; no redirects and no retries (oidc-provider's own settings).
 * What fails is reported to the client as oidc-provider's generic error (`invalid_client`,
 * "client authentication failed"); nothing of the target's answer reaches it.
 */
import { lookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import type { Configuration } from 'oidc-provider';
import { addressRefusal, checkUrl, SafeFetchError } from '../providers/safe-fetch.js';

const TIMEOUT_MS = 5_000;

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** oidc-provider's `httpOptions`: every outbound request of the provider under the SSRF rules. */
export const guardedHttpOptions: NonNullable<Configuration['httpOptions']> = (url) => {
  checkUrl(url, false);
  return { signal: AbortSignal.timeout(TIMEOUT_MS), dnsLookup: publicOnlyLookup as never };
};

/** `dns.lookup` that answers only when every address of the name is public. */
function publicOnlyLookup(hostname: string, options: LookupOneOptions | LookupAllOptions | LookupCallback, callback?: LookupCallback): void {
  const done = (typeof options === 'function' ? options : callback)!;
  const wantsAll = typeof options === 'object' && options.all === true;
  lookup(hostname, { all: true }, (err, addresses) => {
    if (err) return done(err, []);
    const refusal = addresses.length === 0 ? 'refused, the host does not resolve' : addressRefusal(addresses, false);
    if (refusal) return done(Object.assign(new SafeFetchError('address', `${hostname}: ${refusal}`), { code: 'ESSRFREFUSED' }), []);
    if (wantsAll) return done(null, addresses);
    done(null, addresses[0]!.address, addresses[0]!.family);
  });
}
