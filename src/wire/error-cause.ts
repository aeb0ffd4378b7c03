/**
 * The one walker down an error's `cause` chain for its system code (`ECONNREFUSED`,
 * `UND_ERR_HEADERS_TIMEOUT`, …). fetch() and undici wrap the socket's error
 * (`TypeError: fetch failed` → `cause: Error { code }`), so the code that says what went
 * wrong sits one or more levels down (ECMAScript 2022 `Error.prototype.cause`).
 *
 * Only a code that looks like one is returned (capitals, digits, `_`; 2 to 40 characters):
 * codes are quoted in messages that reach clients and logs, so nothing else from a foreign
 * error object gets there.
 */

/** How many levels of `cause` are followed: undici nests two, a loop is cut short. */
const MAX_DEPTH = 4;
const CODE = /^[A-Z0-9_]{2,40}$/;

/** The first system-style `code` on `err` or its causes, else undefined. */
export function errorCauseCode(err: unknown): string | undefined {
  let e = err as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < MAX_DEPTH; depth++) {
    if (typeof e.code === 'string' && CODE.test(e.code)) return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
}
