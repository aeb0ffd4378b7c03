/**
 * The `WWW-Authenticate` field of a backend's 401 (RFC 9110 §11.6.1), parsed into its
 * challenges: where discovery finds the `resource_metadata` URL (RFC 9728 §5.1) and the
 * `scope` the backend asks for (MCP 2025-11-25 "Authorization", scope selection).
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

/**
 * The scopes a backend's 403 asks for (RFC 6750 §3.1 `insufficient_scope`; MCP 2025-11-25
 * "Authorization", §Step-Up Authorization Flow): the `scope` of its Bearer challenge whose
 * `error` is `insufficient_scope` (empty when it names none), or undefined when the field
 * holds no such challenge (a 403 for another reason).
 */
export function insufficientScope(header: string | string[] | undefined): string[] | undefined {
  const text = Array.isArray(header) ? header.join(', ') : header;
  if (!text) return undefined;
  const challenge = parseWwwAuthenticate(text).find((c) => c.scheme === 'bearer' && c.params.error === 'insufficient_scope');
  return challenge && splitScopes(challenge.params.scope);
}

/**
 * The `scope` of a backend's Bearer challenge, whatever its status and `error` (a 401 to a
 * token-less request, or to a refused token; MCP 2025-11-25 "Authorization", §Scope
 * Selection Strategy): undefined when the field holds no Bearer challenge naming one.
 */
export function challengeScopes(header: string | string[] | undefined): string[] | undefined {
  const text = Array.isArray(header) ? header.join(', ') : header;
  const scope = text ? parseWwwAuthenticate(text).find((c) => c.scheme === 'bearer' && c.params.scope !== undefined)?.params.scope : undefined;
  return scope === undefined ? undefined : splitScopes(scope);
}

/** A scope string as a list: space-separated (RFC 6749 §3.3), commas tolerated (Slack). */
export function splitScopes(scope: string | undefined): string[] {
  return (scope ?? '').split(/[\s,]+/).filter((s) => s !== '');
}
