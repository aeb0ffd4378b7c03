/**
 * What an anonymous RFC 7591 registration may carry (issue 28 §3, §4). Registration at
 * `/oauth2/register` needs no initial access token (MCP clients register themselves), so
 * everything in the document is a stranger's, kept in Redis and acted upon:
 *
 * - **Bounded** (§4): the whole document at most {@link MAX_DOCUMENT_BYTES} (the route's body
 *   limit, registration-gate.ts), at most {@link MAX_FIELDS} fields, each string at most
 *   {@link MAX_STRING} characters (the longest URL the broker takes, as for metadata document
 *   URLs), each list at most {@link MAX_LIST} strings. An MCP client's registration is a few
 *   hundred bytes.
 * - **Nothing the provider would fetch** (§3): oidc-provider fetches `sector_identifier_uri`
 *   when a client is registered or loaded, and `jwks_uri` when a `private_key_jwt` client
 *   authenticates — a stranger would make the gateway call an internal service. So no
 *   `sector_identifier_uri`, no `jwks_uri` or `jwks` (their only use would be
 *   `private_key_jwt`), and `token_endpoint_auth_method` only `none` (public clients, what MCP
 *   clients use) or `client_secret_basic` / `client_secret_post` / `client_secret_jwt`
 *   (a secret the broker issues). The outbound guard (outbound-guard.ts) stands behind this.
 *
 * A refusal is RFC 7591 §3.2.2 `invalid_client_metadata`, naming the field.
 */

export const MAX_DOCUMENT_BYTES = 8 * 1024;
export const MAX_FIELDS = 40;
export const MAX_STRING = 2048;
export const MAX_LIST = 10;

/** Token endpoint authentication that needs nothing fetched (RFC 7591 §2). */
const AUTH_METHODS = new Set(['none', 'client_secret_basic', 'client_secret_post', 'client_secret_jwt']);
/** Fields that make the provider fetch a URL, or exist only for a method that does. */
const REFUSED_FIELDS = ['sector_identifier_uri', 'jwks_uri', 'jwks'];

/** Why the registration document is refused, or undefined when it may go to the provider. */
export function registrationProblem(doc: unknown): string | undefined {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return 'the registration must be a JSON object';
  const d = doc as Record<string, unknown>;
  for (const name of REFUSED_FIELDS) if (d[name] !== undefined) return `${name} is not accepted in an anonymous registration`;
  const method = d.token_endpoint_auth_method;
  if (method !== undefined && !AUTH_METHODS.has(method as string)) return `token_endpoint_auth_method must be one of ${[...AUTH_METHODS].join(', ')}`;
  const fields = Object.entries(d);
  if (fields.length > MAX_FIELDS) return `at most ${MAX_FIELDS} fields`;
  for (const [name, value] of fields) {
    if (name.length > 100) return 'a field name is longer than 100 characters';
    const problem = valueProblem(value);
    if (problem) return `${name} ${problem}`;
  }
  return undefined;
}

/** Strings, numbers, booleans and short lists of short strings; nothing nested. */
function valueProblem(value: unknown): string | undefined {
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return undefined;
  if (typeof value === 'string') return value.length > MAX_STRING ? `is longer than ${MAX_STRING} characters` : undefined;
  if (Array.isArray(value)) {
    if (value.length > MAX_LIST) return `lists more than ${MAX_LIST} values`;
    if (!value.every((v) => typeof v === 'string')) return 'must list strings';
    return value.some((v: string) => v.length > MAX_STRING) ? `holds a value longer than ${MAX_STRING} characters` : undefined;
  }
  return 'must be a string, a number, a boolean or a list of strings';
}
