/**
 * `resultType` on every result (MCP 2026-07-28 changelog, major change 8; schema `Result`):
 * `"complete"` for an ordinary result, `"input_required"` for a multi round-trip interim one
 * (basic/patterns/mrtr). A server of this revision MUST include it; a 2025-11-25 backend never
 * does, and some 2026 servers forget it on streamed results (issue 15), so the gateway adds
 * `"complete"` where it is missing on the way to a 2026 client. On the way to a client of an
 * earlier revision it goes the other way: the member, and the cache hints, are taken out.
 */

export const RESULT_TYPE = { complete: 'complete', inputRequired: 'input_required' } as const;

/** The methods whose 2026-07-28 results are cacheable, carrying `ttlMs` and `cacheScope` ("Caching"). */
export const CACHEABLE_METHODS: ReadonlySet<string> = new Set(['server/discover', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

/** What a 2026-07-28 result may carry that no earlier revision's schema has. */
const CACHE_HINTS = ['ttlMs', 'cacheScope'] as const;

/**
 * The message as a client of 2025-11-25 or earlier must get a 2026-07-28 backend's answer to
 * `method` (issue 42 §10): its result without `resultType`, and without the cache hints when
 * `method` is cacheable (the only results that have them). Anything else — errors, requests,
 * notifications, a result with none of these members — comes back as it is, the same object.
 * Never mutates.
 */
export function withoutRevisionMembers<T extends object>(message: T, method: unknown): T {
  const result = (message as { result?: unknown }).result;
  if (!isObject(result)) return message;
  const members = typeof method === 'string' && CACHEABLE_METHODS.has(method) ? ['resultType', ...CACHE_HINTS] : ['resultType'];
  if (!members.some((m) => m in result)) return message;
  const kept = { ...result };
  for (const member of members) delete kept[member];
  return { ...message, result: kept };
}

/**
 * {@link withoutRevisionMembers} on the text of one JSON-RPC message held whole: text that
 * names none of the members passes without a parse; text that is not one JSON object passes
 * as it is. (An answer too big to hold is read message by message, parsed there anyway.)
 */
export function withoutRevisionMembersText(text: string, method: unknown): string {
  if (!text.includes('resultType') && !CACHE_HINTS.some((m) => text.includes(m))) return text;
  return parsedAndShaped(text, (message) => withoutRevisionMembers(message, method));
}

/**
 * The message with `resultType: "complete"` added to its result when the result is an object
 * without one. Errors, requests, notifications, and results that name a type (`input_required`
 * or one this gateway does not know) come back as they are — the same object. Never mutates.
 */
export function withResultType<T extends object>(message: T): T {
  const result = (message as { result?: unknown }).result;
  if (!isObject(result) || 'resultType' in result) return message;
  return { ...message, result: { ...result, resultType: RESULT_TYPE.complete } };
}

/** True for an `InputRequiredResult` (schema: `resultType: "input_required"`). */
export function isInputRequired(result: unknown): boolean {
  return isObject(result) && result.resultType === RESULT_TYPE.inputRequired;
}

/**
 * A response's members that may precede `result` at the top level — `jsonrpc` and `id` with
 * their scalar values, in either order — then `"result":{`. Anchored at the start, so the
 * match proves the brace opens the top-level result and not something nested.
 */
const RESULT_OPENING = /^\s*\{\s*(?:(?:"jsonrpc"\s*:\s*"2\.0"|"id"\s*:\s*(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|"(?:[^"\\]|\\.)*"|null))\s*,\s*)*"result"\s*:\s*\{(\s*\})?/;

/**
 * {@link withResultType} on the text of one JSON-RPC message (a JSON answer body, an SSE
 * event's data), without parsing it when it need not. Text with no `"result"` member passes as
 * it is. When the text holds no `resultType` anywhere and no `\u` escape (the one way to
 * spell either key otherwise), and its result opens after only `jsonrpc` and `id`, the member
 * is written in after the result's brace; when `resultType` is the result's first member, the
 * text passes as it is. Any other text — a result that may hold the key,
 * members in another order — takes the parse path, where text that is not JSON passes as it
 * is. The fast path does not validate: broken JSON from a backend stays broken, one member longer.
 */
export function withResultTypeText(text: string): string {
  const verdict = fastVerdict(text, text.length, (needle) => text.includes(needle));
  if (verdict === 'as-is') return text;
  if (verdict) return `${text.slice(0, verdict.at)}${verdict.member}${text.slice(verdict.at)}`;
  return parsedWithResultType(text);
}

/**
 * {@link withResultTypeText} on the bytes of a JSON answer body, without decoding them when it
 * need not (the stateless `tools/call` relays a backend's JSON this way: `npm run bench`, issue
 * 15). Only the head of the body is read as text, as Latin-1, one character per byte, so the
 * offsets found there are byte offsets; UTF-8 never uses a byte below 0x80 inside a character,
 * so the quotes and backslashes the pattern looks for are the real ones. Bytes that need the
 * parse path are decoded and shaped as text.
 */
export function withResultTypeBytes(bytes: Buffer): Buffer {
  const whole = bytes.length <= HEAD_BYTES;
  const head = bytes.toString('latin1', 0, whole ? bytes.length : HEAD_BYTES);
  // A body read whole as its head is searched there: a string search costs a third of a Buffer's.
  const verdict = fastVerdict(head, bytes.length, whole ? (needle) => head.includes(needle) : (needle) => bytes.includes(NEEDLES[needle]));
  if (verdict === 'as-is') return bytes;
  if (verdict) {
    const member = MEMBER_BYTES[verdict.member];
    return Buffer.concat([bytes.subarray(0, verdict.at), member, bytes.subarray(verdict.at)], bytes.length + member.length);
  }
  const text = bytes.toString('utf8');
  const shaped = parsedWithResultType(text);
  return shaped === text ? bytes : Buffer.from(shaped);
}

type Needle = '\\u' | '"result"' | 'resultType';

/** The strings looked for, as bytes once (a string needle is encoded again on every search). */
const NEEDLES: Readonly<Record<Needle, Buffer>> = { '\\u': Buffer.from('\\u'), '"result"': Buffer.from('"result"'), resultType: Buffer.from('resultType') };

/** The members {@link fastVerdict} writes in, as bytes once. */
const MEMBER_BYTES: Readonly<Record<Member, Buffer>> = { '"resultType":"complete"': Buffer.from('"resultType":"complete"'), '"resultType":"complete",': Buffer.from('"resultType":"complete",') };

type Member = '"resultType":"complete"' | '"resultType":"complete",';

/** How much of a body's head is read for the opening of its result: ids past this take the parse path. */
const HEAD_BYTES = 512;

/**
 * What can be told without parsing, from the message's `head` (of a message `total` long) and
 * searches of the whole (`contains`, done only when needed, cheapest answer first):
 * - `as-is`: no `"result"` member at all (an error, a notification), or a result whose first
 *   member is `resultType` (as a 2026 backend writes it: no search of the body at all);
 * - where to write the member: the text names no `resultType` anywhere and has no `\u` escape
 *   (the one way to spell either key otherwise), and the result opens after only `jsonrpc` and
 *   `id` — right after its brace, with a comma unless the result is empty (and not when only
 *   white space follows the brace in a head cut short: the closing brace may lie beyond);
 * - undefined: the parse path decides.
 */
function fastVerdict(head: string, total: number, contains: (needle: Needle) => boolean): { at: number; member: Member } | 'as-is' | undefined {
  const opening = RESULT_OPENING.exec(head);
  if (!opening) return contains('\\u') || contains('"result"') ? undefined : 'as-is';
  const empty = opening[1] !== undefined;
  if (!empty) {
    TYPED_FIRST.lastIndex = opening[0].length;
    if (TYPED_FIRST.test(head)) return 'as-is';
  }
  if (contains('\\u') || contains('resultType')) return undefined;
  if (head.length < total && ONLY_SPACE.test(head.slice(opening[0].length))) return undefined;
  return { at: opening[0].length - (opening[1]?.length ?? 0), member: empty ? '"resultType":"complete"' : '"resultType":"complete",' };
}

/** `resultType` as the first member of the object whose brace was just read. */
const TYPED_FIRST = /\s*"resultType"\s*:/y;

const ONLY_SPACE = /^\s*$/;

/** The parse path: text that is not one JSON object passes as it is. */
function parsedWithResultType(text: string): string {
  return parsedAndShaped(text, withResultType);
}

/** The text of `shape(message)`; the text itself when it is not one JSON object or `shape` changed nothing (returned the same object). */
function parsedAndShaped(text: string, shape: (message: Record<string, unknown>) => Record<string, unknown>): string {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return text;
  }
  if (!isObject(message)) return text;
  const shaped = shape(message);
  return shaped === message ? text : JSON.stringify(shaped);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
