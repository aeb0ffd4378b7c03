/**
 * The Base64 sentinel of MCP 2026-07-28 (Transports §Value Encoding): a value that cannot travel
 * as a plain header value — non-ASCII, a control character, leading or trailing whitespace, or
 * plain text that itself looks like a sentinel — goes as `=?base64?{Base64 of its UTF-8}?=`.
 * It applies to `Mcp-Name` and `Mcp-Param-{Name}` only; servers decode before comparing a
 * header with the body (§Server Validation).
 */

const PREFIX = '=?base64?';
const SUFFIX = '?=';

/** Visible ASCII and the space (RFC 9110 §5.5 field-vchar and SP); a tab is a control character, so it is encoded. */
const PLAIN_SAFE = /^[\x20-\x7e]*$/;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** True when the text has the sentinel's form: the prefix and, after it, the suffix (the two do not overlap). */
function isSentinel(text: string): boolean {
  return text.length >= PREFIX.length + SUFFIX.length && text.startsWith(PREFIX) && text.endsWith(SUFFIX);
}

/**
 * The header value a client MUST send for `value`: the value itself when it is plain ASCII
 * without edge whitespace and does not look like a sentinel, else the sentinel form. The
 * look-alike test is the spec's ("starts with `=?base64?` and ends with `?=`"), which is wider
 * than {@link isSentinel}: `=?base64?=` is encoded too.
 */
export function encodeHeaderValue(value: string): string {
  const edgeSpace = value.length > 0 && (value[0] === ' ' || value[value.length - 1] === ' ');
  const lookalike = value.startsWith(PREFIX) && value.endsWith(SUFFIX);
  if (PLAIN_SAFE.test(value) && !edgeSpace && !lookalike) return value;
  return `${PREFIX}${Buffer.from(value, 'utf8').toString('base64')}${SUFFIX}`;
}

/**
 * The value a header carries: a sentinel decoded, anything else as it is (a value without the
 * prefix or without the suffix is literal text, §Value Encoding). Undefined for a malformed
 * sentinel — Base64 outside the standard alphabet, without its padding, with stray bits, or
 * bytes that are not UTF-8 — which the server rejects (-32020) rather than guessing, as the
 * SEP-2243 conformance table asks; Node's own decoder would accept all of these silently.
 */
export function decodeHeaderValue(raw: string): string | undefined {
  if (!isSentinel(raw)) return raw;
  const encoded = raw.slice(PREFIX.length, raw.length - SUFFIX.length);
  const bytes = Buffer.from(encoded, 'base64');
  // Node decodes leniently (skips foreign characters, takes the URL alphabet, missing padding
  // and stray bits); only canonical RFC 4648 §4 Base64 encodes back to the same text.
  if (bytes.toString('base64') !== encoded) return undefined;
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}
