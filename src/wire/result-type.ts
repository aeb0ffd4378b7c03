/**
 * `resultType` on every result (MCP 2026-07-28 changelog, major change 8; schema `Result`):
 * `"complete"` for an ordinary result, `"input_required"` for a multi round-trip interim one
 * (basic/patterns/mrtr). A server of this revision MUST include it; a 2025-11-25 backend never
 * does, and some 2026 servers forget it on streamed results (issue 15), so the gateway adds
 * `"complete"` where it is missing on the way to a 2026 client.
 */

export const RESULT_TYPE = { complete: 'complete', inputRequired: 'input_required' } as const;

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
 * is written in after the result's brace. Any other text — a result that may hold the key,
 * members in another order — takes the parse path, where text that is not JSON passes as it
 * is. The fast path does not validate: broken JSON from a backend stays broken, one member longer.
 */
export function withResultTypeText(text: string): string {
  const escaped = text.includes('\\u');
  if (!escaped && !text.includes('"result"')) return text;
  if (!escaped && !text.includes('resultType')) {
    const opening = RESULT_OPENING.exec(text);
    if (opening) {
      const empty = opening[1] !== undefined;
      const at = opening[0].length - (opening[1]?.length ?? 0);
      return `${text.slice(0, at)}"resultType":"complete"${empty ? '' : ','}${text.slice(at)}`;
    }
  }
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return text;
  }
  if (!isObject(message)) return text;
  const shaped = withResultType(message);
  return shaped === message ? text : JSON.stringify(shaped);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
