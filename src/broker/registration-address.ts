/**
 * Whose registrations count together under `registrationLimits.perAddress` (issue 41 §7).
 *
 * An IPv4 client has one address; an IPv6 client is usually given a whole /64 (RFC 6177,
 * SLAAC), and rotating through it costs nothing — one budget per exact address would be no
 * limit at all. So an IPv6 address counts as its network of `ipv6Prefix` bits (default 64),
 * written `2001:db8:1:2::/64`; an IPv4-mapped IPv6 address (`::ffff:203.0.113.5`, what a
 * dual-stack listener reports for an IPv4 client) counts as the IPv4 address it is. A zone
 * (`fe80::1%eth0`) is dropped. Anything that is not an address (no socket address at all)
 * counts as itself.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** The key the per-address count is kept under: the IPv4 address, or the IPv6 network. */
export function registrationAddressKey(address: string, ipv6Prefix: number): string {
  const bare = address.replace(/%.*$/, '');
  if (!isIPv6(bare)) return address;
  const groups = ipv6Groups(bare);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${formatIPv6(masked(groups, ipv6Prefix))}/${ipv6Prefix}`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, an IPv4 tail as two groups). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  const tail = text.slice(text.lastIndexOf(':') + 1);
  if (isIPv4(tail)) {
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, -tail.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const parse = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(rest);
  return rest === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function masked(groups: number[], prefix: number): number[] {
  return groups.map((g, i) => {
    const keep = Math.min(16, Math.max(0, prefix - i * 16));
    return keep === 16 ? g : g & ((0xffff << (16 - keep)) & 0xffff);
  });
}

/** RFC 5952 text: lower case, no leading zeros, the longest run of two or more zero groups as `::`. */
function formatIPv6(groups: number[]): string {
  let best = { at: -1, length: 1 };
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.length) best = { at: i, length: j - i };
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.at < 0) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.length).join(':')}`;
}
