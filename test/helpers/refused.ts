/**
 * Asserts that an SDK call (v1 or v2 client) failed with a JSON-RPC error of `code` whose
 * message matches `pattern`; a call that succeeded fails the assertion with its result.
 */
import assert from 'node:assert/strict';

export async function refused(promise: Promise<unknown>, code: number, pattern: RegExp): Promise<void> {
  const err = await promise.then(
    (value) => value,
    (e: unknown) => e,
  );
  const error = err as { code?: unknown; message?: string };
  assert.equal(error.code, code, `expected ${code}, got ${JSON.stringify(err)}`);
  assert.match(String(error.message), pattern);
}
