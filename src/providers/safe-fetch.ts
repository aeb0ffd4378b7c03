/**
 * An SSRF-guarded HTTP client for URLs that come from someone else's metadata
 * (`upstreamAuth.discover`: a backend's `WWW-Authenticate`, RFC 9728 and RFC 8414
 * documents, RFC 7591 registration). Without it, a backend could make the gateway fetch
 * cloud metadata services or internal admin endpoints.
 *
 * Rules (see the OWASP SSRF Prevention Cheat Sheet; MCP 2025-11-25 Authorization,
 * "Security Considerations"):
 * - `https:` only; `http:` only for a loopback host, and only with `allowLoopback`.
 * - No credentials in the URL.
 * - The host's addresses (an IP literal as is, checked before any connection; a name
 *   through `dns.lookup` with `all: true`) must all be public unicast: private, shared,
 *   link-local, unique-local, multicast, unspecified, reserved and documentation ranges
 *   are refused, and loopback is refused unless `allowLoopback` is set.
 * - The connection goes to the addresses that were checked (a pinned lookup), so a DNS
 *   answer that changes between check and connect (rebinding) cannot redirect it.
 * - Redirects are never followed: a 3xx is an error.
 * - The whole exchange is bounded in time (default 10 s) and the body in size (default
 *   256 KiB); the returned Response holds the body in memory.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, request } from 'undici';
import { errorCauseCode } from '../wire/error-cause.js';
import { untilAborted } from '../backends/abortable.js';

export type SafeFetchRefusal = 'url' | 'address' | 'dns' | 'redirect' | 'timeout' | 'too_large' | 'network';

/** A refused or failed guarded fetch. Messages name the origin and path, never a query or body. */
export class SafeFetchError extends Error {
  constructor(
    readonly reason: SafeFetchRefusal,
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'SafeFetchError';
  }
}

export interface SafeFetchInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Permit loopback hosts (localhost, 127.0.0.0/8, ::1), and `http:` for them. Tests and local development only. */
  allowLoopback?: boolean;
  /** Whole exchange, body included (default 10 s). */
  timeoutMs?: number;
  /** Largest accepted response body (default 256 KiB). */
  maxBodyBytes?: number;
  /** Name resolution (default `dns.lookup` with `all: true`); for tests. */
  resolve?: (hostname: string) => Promise<LookupAddress[]>;
  /** The caller's own abort signal, combined with the timeout. */
  signal?: AbortSignal;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_BODY = 256 * 1024;

/** Fetches `url` under the rules above. Rejects with SafeFetchError. */
export async function safeFetch(url: string | URL, init: SafeFetchInit = {}): Promise<Response> {
  const target = parseTarget(url, init.allowLoopback === true);
  const where = `${target.origin}${target.pathname}`;
  const timeout = AbortSignal.timeout(init.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const signal = init.signal ? AbortSignal.any([timeout, init.signal]) : timeout;
  const addresses = await checkedAddresses(target, where, init, signal);
  const agent = pinnedAgent(addresses);
  try {
    const res = await send(target, where, init, agent, signal);
    if (res.statusCode >= 300 && res.statusCode < 400) {
      discard(res.body);
      throw new SafeFetchError('redirect', `${where}: answered with a redirect (${res.statusCode}); redirects are not followed`, res.statusCode);
    }
    const body = await readBody(res, where, init.maxBodyBytes ?? DEFAULT_MAX_BODY, signal);
    const headers = new Headers();
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
    }
    const nullBody = res.statusCode === 204 || res.statusCode === 304;
    return new Response(nullBody ? null : body, { status: res.statusCode, headers });
  } finally {
    agent.close().catch(() => undefined);
  }
}

type UndiciResponse = Awaited<ReturnType<typeof request>>;

/**
 * The host's addresses — an IP literal as is, a name resolved in full — each of them public
 * (or loopback, when allowed), and `http:` only when all are loopback.
 */
async function checkedAddresses(target: URL, where: string, init: SafeFetchInit, signal: AbortSignal): Promise<LookupAddress[]> {
  const host = bareHost(target.hostname);
  let addresses: LookupAddress[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await untilAborted((init.resolve ?? resolveAll)(host), signal);
    } catch (err) {
      if (isTimeout(err)) throw new SafeFetchError('timeout', `${where}: name resolution did not finish in time`);
      throw new SafeFetchError('dns', `${where}: the host name does not resolve`);
    }
    if (addresses.length === 0) throw new SafeFetchError('dns', `${where}: the host name does not resolve`);
  }
  const refusal = addressRefusal(addresses, Boolean(init.allowLoopback));
  if (refusal) throw new SafeFetchError('address', `${where}: ${refusal}`);
  if (target.protocol === 'http:' && !addresses.every((a) => classifyAddress(a.address) === 'loopback')) {
    throw new SafeFetchError('url', `${where}: refused, http is allowed for loopback hosts only`);
  }
  return addresses;
}

/**
 * Why a host with these addresses may not be connected to — the first that is not public
 * (nor loopback, where allowed) — or undefined when every one may. Also the broker's guard on
 * its provider's own HTTP client (broker/outbound-guard.ts).
 */
export function addressRefusal(addresses: readonly LookupAddress[], allowLoopback: boolean): string | undefined {
  for (const a of addresses) {
    const verdict = classifyAddress(a.address);
    if (verdict === 'public' || (verdict === 'loopback' && allowLoopback)) continue;
    return `refused, the host resolves to a ${verdict} address`;
  }
  return undefined;
}

/** A connection pool that connects only to `pinned`, the addresses just checked (no second lookup to rebind). */
function pinnedAgent(pinned: LookupAddress[]): Agent {
  return new Agent({
    connect: {
      lookup: ((_hostname: string, options: LookupOptions, callback: (...args: unknown[]) => void) => {
        if ((options as LookupAllOptions).all) callback(null, pinned);
        else callback(null, pinned[0]!.address, pinned[0]!.family);
      }) as never,
    },
  });
}

/** The request itself; a failure to get an answer is a timeout or a network refusal (with the cause's code only). */
async function send(target: URL, where: string, init: SafeFetchInit, agent: Agent, signal: AbortSignal): Promise<UndiciResponse> {
  try {
    return await request(target, {
      method: (init.method ?? 'GET') as 'GET',
      headers: init.headers,
      body: init.body,
      dispatcher: agent,
      signal,
    });
  } catch (err) {
    if (isTimeout(err) || signal.aborted) throw new SafeFetchError('timeout', `${where}: no answer in time`);
    throw new SafeFetchError('network', `${where}: request failed${errorCauseCode(err) ? ` (${errorCauseCode(err)})` : ''}`);
  }
}

/** The whole body, at most `max` bytes (more is refused as `too_large` and the rest dropped). */
async function readBody(res: UndiciResponse, where: string, max: number, signal: AbortSignal): Promise<Buffer<ArrayBuffer>> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body) {
      const buf = chunk as Buffer;
      size += buf.byteLength;
      if (size > max) {
        discard(res.body);
        throw new SafeFetchError('too_large', `${where}: response body exceeds ${max} bytes`, res.statusCode);
      }
      chunks.push(buf);
    }
  } catch (err) {
    if (err instanceof SafeFetchError) throw err;
    if (isTimeout(err) || signal.aborted) throw new SafeFetchError('timeout', `${where}: body not received in time`);
    throw new SafeFetchError('network', `${where}: body could not be read`);
  }
  return Buffer.concat(chunks);
}

/**
 * A fetch-shaped function over {@link safeFetch}, for code written against `fetch`
 * (provider-client.ts's `fetch` option, for token and revocation endpoints that came from
 * discovery). String bodies only; redirects and refusals reject with SafeFetchError.
 */
export function guardedFetch(options: Pick<SafeFetchInit, 'allowLoopback' | 'timeoutMs' | 'maxBodyBytes' | 'resolve'> = {}): (url: string, init?: RequestInit) => Promise<Response> {
  return (url, init = {}) => {
    if (init.body !== undefined && init.body !== null && typeof init.body !== 'string') {
      return Promise.reject(new SafeFetchError('url', 'guardedFetch sends string bodies only'));
    }
    const safeInit: SafeFetchInit = { ...options, method: init.method ?? 'GET', headers: Object.fromEntries(new Headers(init.headers).entries()) };
    if (typeof init.body === 'string') safeInit.body = init.body;
    if (init.signal) safeInit.signal = init.signal;
    return safeFetch(url, safeInit);
  };
}

/**
 * Checks a URL's form (scheme, credentials, IP-literal ranges) without any network
 * access; returns the parsed URL. Exported for validating discovered endpoint URLs that
 * other code fetches (token and revocation endpoints) and the browser opens.
 */
export function checkUrl(url: string | URL, allowLoopback: boolean): URL {
  return parseTarget(url, allowLoopback);
}

function parseTarget(url: string | URL, allowLoopback: boolean): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new SafeFetchError('url', 'refused: not a valid URL');
  }
  const where = `${u.origin}${u.pathname}`;
  if (u.username || u.password) throw new SafeFetchError('url', `${where}: refused, credentials in the URL`);
  const host = bareHost(u.hostname);
  const loopbackName = isLoopbackName(host);
  if (u.protocol === 'http:') {
    if (!loopbackName || !allowLoopback) throw new SafeFetchError('url', `${where}: refused, only https is allowed${loopbackName ? ' (loopback not enabled)' : ''}`);
  } else if (u.protocol !== 'https:') {
    throw new SafeFetchError('url', `${where}: refused, only https is allowed`);
  }
  if (isIP(host)) {
    const verdict = classifyAddress(host);
    if (verdict !== 'public' && !(verdict === 'loopback' && allowLoopback)) {
      throw new SafeFetchError('address', `${where}: refused, ${verdict} address`);
    }
  } else if (loopbackName && !allowLoopback) {
    throw new SafeFetchError('address', `${where}: refused, loopback host`);
  }
  return u;
}

/** `[::1]` → `::1`. */
function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** `localhost`, `*.localhost` (RFC 6761 §6.3), or a loopback IP literal. */
function isLoopbackName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  return isIP(h) !== 0 && classifyAddress(h) === 'loopback';
}

export type AddressClass = 'public' | 'loopback' | 'private' | 'link-local' | 'unique-local' | 'multicast' | 'unspecified' | 'reserved';

/**
 * Which range an IP address is in (IANA IPv4/IPv6 Special-Purpose Address Registries,
 * RFC 6890). IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96) and 6to4 (2002::/16)
 * IPv6 addresses are judged by the IPv4 address they carry.
 */
export function classifyAddress(address: string): AddressClass {
  const family = isIP(address);
  if (family === 4) return classifyV4(v4Octets(address));
  if (family === 6) return classifyV6(address);
  return 'reserved';
}

function v4Octets(address: string): number[] {
  return address.split('.').map(Number);
}

function classifyV4([a = 0, b = 0, c = 0]: number[]): AddressClass {
  if (a === 0) return 'unspecified'; // 0.0.0.0/8 "this network"
  if (a === 127) return 'loopback';
  if (a === 10) return 'private';
  if (a === 172 && b >= 16 && b <= 31) return 'private';
  if (a === 192 && b === 168) return 'private';
  if (a === 100 && b >= 64 && b <= 127) return 'private'; // 100.64.0.0/10 shared (CGN)
  if (a === 169 && b === 254) return 'link-local'; // includes 169.254.169.254 (cloud metadata)
  if (a === 192 && b === 0 && c === 0) return 'reserved'; // IETF protocol assignments
  if (a === 192 && b === 0 && c === 2) return 'reserved'; // TEST-NET-1
  if (a === 198 && (b === 18 || b === 19)) return 'reserved'; // benchmarking
  if (a === 198 && b === 51 && c === 100) return 'reserved'; // TEST-NET-2
  if (a === 203 && b === 0 && c === 113) return 'reserved'; // TEST-NET-3
  if (a >= 224 && a <= 239) return 'multicast';
  if (a >= 240) return 'reserved'; // includes 255.255.255.255
  return 'public';
}

function classifyV6(address: string): AddressClass {
  const w = v6Words(address);
  if (!w) return 'reserved';
  const [w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0, w5 = 0, w6 = 0, w7 = 0] = w;
  const embeddedV4 = () => classifyV4([w6 >> 8, w6 & 0xff, w7 >> 8, w7 & 0xff]);
  const zeroHigh = w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0 && w4 === 0;
  if (zeroHigh && w5 === 0 && w6 === 0 && w7 === 0) return 'unspecified';
  if (zeroHigh && w5 === 0 && w6 === 0 && w7 === 1) return 'loopback';
  if (zeroHigh && (w5 === 0xffff || w5 === 0)) return embeddedV4(); // ::ffff:a.b.c.d, ::a.b.c.d
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return embeddedV4(); // NAT64
  if (w0 === 0x2002) return classifyV4([w1 >> 8, w1 & 0xff, w2 >> 8, w2 & 0xff]); // 6to4
  if ((w0 & 0xfe00) === 0xfc00) return 'unique-local'; // fc00::/7
  if ((w0 & 0xffc0) === 0xfe80) return 'link-local'; // fe80::/10
  if ((w0 & 0xffc0) === 0xfec0) return 'private'; // fec0::/10 site-local (deprecated)
  if ((w0 & 0xff00) === 0xff00) return 'multicast';
  if (w0 === 0x2001 && w1 === 0x0db8) return 'reserved'; // documentation
  if (w0 === 0x0100 && w1 === 0 && w2 === 0 && w3 === 0) return 'reserved'; // discard-only
  if (w0 === 0x2001 && w1 < 0x0200) return 'reserved'; // IETF protocol assignments (Teredo, ORCHID…)
  if ((w0 & 0xe000) !== 0x2000) return 'reserved'; // outside global unicast 2000::/3
  return 'public';
}

/** Eight 16-bit words of an IPv6 address (zone id dropped), or undefined. */
function v6Words(address: string): number[] | undefined {
  let s = address.split('%')[0]!.toLowerCase();
  const tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const [a = 0, b = 0, c = 0, d = 0] = v4Octets(v4[1]!);
    tail.push((a << 8) | b, (c << 8) | d);
    s = s.slice(0, -v4[1]!.length);
    if (s.endsWith(':') && !s.endsWith('::')) s = s.slice(0, -1);
  }
  const [head = '', rest] = s.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  const left = parse(head);
  const right = [...parse(rest ?? ''), ...tail];
  const missing = 8 - left.length - right.length;
  if (rest === undefined && missing !== 0) return undefined;
  if (missing < 0) return undefined;
  const words = rest === undefined ? [...left, ...right] : [...left, ...new Array<number>(missing).fill(0), ...right];
  return words.length === 8 && words.every((n) => Number.isInteger(n) && n >= 0 && n <= 0xffff) ? words : undefined;
}

/** Drops a body we will not read (an 'error' listener keeps the abort from going uncaught). */
function discard(body: NodeJS.ReadableStream & { destroy(): void }): void {
  body.on('error', () => undefined);
  body.destroy();
}

function resolveAll(hostname: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });
}

function isTimeout(err: unknown): boolean {
  const name = (err as { name?: string } | undefined)?.name;
  return name === 'TimeoutError' || name === 'AbortError';
}
