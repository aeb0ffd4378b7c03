/**
 * The aggregated endpoint's pagination cursor (MCP 2025-11-25 "Pagination"): which backend
 * the next page comes from and that backend's own cursor. It is opaque to clients (base64url
 * JSON) and checked when it comes back; one that does not decode, or that names a backend
 * outside the session, is an invalid params error (-32602), as the spec asks.
 */
export interface CompositeCursor {
  backend: string;
  /** The backend's own cursor; absent for its first page. */
  cursor?: string;
}

export function encodeCursor(c: CompositeCursor): string {
  return Buffer.from(JSON.stringify(c.cursor === undefined ? { b: c.backend } : { b: c.backend, c: c.cursor })).toString('base64url');
}

/** The decoded cursor, or undefined when it is not one of ours. */
export function decodeCursor(value: unknown, backends: readonly string[]): CompositeCursor | undefined {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_-]+$/.test(value)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!parsed || typeof parsed !== 'object') return undefined;
  const { b, c } = parsed as { b?: unknown; c?: unknown };
  if (typeof b !== 'string' || !backends.includes(b)) return undefined;
  if (c !== undefined && typeof c !== 'string') return undefined;
  return c === undefined ? { backend: b } : { backend: b, cursor: c };
}
