/**
 * The `WWW-Authenticate` field (RFC 9110 §11.6.1), parsed into its challenges: what
 * discovery reads a backend's 401 with (providers/www-authenticate.ts: `resource_metadata`,
 * RFC 9728 §5.1, and `scope`), and what the backend client reads a DPoP `use_dpop_nonce`
 * challenge with (backends/dpop-exchange.ts, RFC 9449 §9).
 */

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
