/**
 * What a session record keeps of the client's `initialize` capabilities (MCP 2025-11-25
 * "Lifecycle", ClientCapabilities). The gateway reads them in two ways:
 *
 * - itself: whether the client declared URL-mode elicitation (`elicitation.url`,
 *   connect/elicitation-replies.ts), and so which of `elicitation`, `sampling`, `roots` it has;
 * - on behalf of the client: `/mcp` repeats them to a backend that joins the session later
 *   (aggregate/rejoin.ts, aggregate/member-link.ts) and linking repeats them when it opens the
 *   backend session after the account is linked (linking/backend-session.ts).
 *
 * So a copy is kept as sent while it is small; a larger one (issue 13: 3 MiB capabilities in
 * each of 60 sessions grew Redis by 214 MiB for 24 h) is cut down to the names of its
 * capabilities and of their flags, booleans kept — which still answers every question above.
 */

/** Largest capabilities object kept as the client sent it (its JSON, in UTF-8 bytes). */
export const MAX_STORED_CAPABILITIES_BYTES = 16 * 1024;

/** In a cut-down copy: this many capabilities, this many flags each, names this long. */
const MAX_KEYS = 32;
const MAX_NAME_CHARS = 64;

export function storedClientCapabilities(capabilities: unknown): Record<string, unknown> {
  if (!isObject(capabilities)) return {};
  if (Buffer.byteLength(JSON.stringify(capabilities)) <= MAX_STORED_CAPABILITIES_BYTES) return capabilities;
  const kept: Record<string, unknown> = {};
  for (const [name, value] of boundedEntries(capabilities)) {
    const flags: Record<string, unknown> = {};
    if (isObject(value)) for (const [flag, v] of boundedEntries(value)) flags[flag] = typeof v === 'boolean' ? v : {};
    kept[name] = flags;
  }
  return kept;
}

function boundedEntries(value: Record<string, unknown>): Array<[string, unknown]> {
  return Object.entries(value)
    .filter(([name]) => name.length <= MAX_NAME_CHARS)
    .slice(0, MAX_KEYS);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
