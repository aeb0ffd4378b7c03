/**
 * `listen.trustProxy` (issue 28 §4): the proxies whose `X-Forwarded-For` names the client.
 * Passed to Fastify's own `trustProxy` (proxy-addr), so `request.ip` is the client's address
 * behind an Ingress or Gateway, and the socket's address without it.
 *
 * A list of proxy addresses and CIDRs (`10.0.0.0/8`), or proxy-addr's names `loopback`,
 * `linklocal`, `uniquelocal` (the private ranges). The address is the rightmost entry of
 * X-Forwarded-For not sent by a trusted proxy, so what a client writes into the header
 * itself is never believed.
 *
 * Not a hop count: Fastify 5.12 ignores one ("cannot validate the immediate peer and lets
 * direct clients spoof X-Forwarded-* values", its Server reference), so a number would be
 * silently no proxy at all. Not "trust everything" either: a client that reaches the gateway
 * directly could then name any address it likes, and the per-address registration limit
 * (src/broker/registration-gate.ts) and the access log would believe it.
 */
import { isIP } from 'node:net';
import { z } from 'zod';

const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** An address, an address/prefix, or a named range. */
function isProxyAddress(entry: string): boolean {
  if (NAMED_RANGES.has(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  const family = isIP(address ?? '');
  if (!family || rest.length) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

export const trustProxySchema = z
  .array(z.string().refine(isProxyAddress, 'must be an IP address, a CIDR (10.0.0.0/8), or loopback, linklocal, uniquelocal'))
  .min(1, 'must list at least one proxy address, or be left out');
