/**
 * Starts test/fixtures/protected-backend.ts: an MCP server that takes only one provider's
 * tokens — on every request, like hosted servers, or with `openListing` only for tool calls —
 * and serves each user their own lists, knowing the caller from each request's token.
 */
import { fileURLToPath } from 'node:url';
import { spawnChild } from './child.js';
import { nodeEntry } from './node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/protected-backend.ts', import.meta.url));

export interface ProtectedBackend {
  url: string;
  /** Every Authorization header the backend received, in order. */
  seenAuthorizations(): Promise<string[]>;
  /** How many MCP sessions it has opened (initialize accepted). */
  sessionsOpened(): Promise<number>;
  /** How many requests carried another user's token on a session (refused 403 by the fixture). */
  foreignSessionUses(): Promise<number>;
  stop(): Promise<void>;
}

export async function startProtectedBackend(providerIssuer: string, options: { openListing?: boolean } = {}): Promise<ProtectedBackend> {
  const child = await spawnChild({
    name: 'protected backend',
    command: process.execPath,
    args: nodeEntry(FIXTURE),
    env: { PORT: '0', PROVIDER_ISSUER: providerIssuer, OPEN_LISTING: options.openListing ? '1' : '0', NODE_OPTIONS: '' },
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
  const url = (JSON.parse(child.readyLine!) as { url: string }).url;
  return {
    url,
    seenAuthorizations: async () => (await fetch(new URL('/seen-authorizations', url))).json() as Promise<string[]>,
    sessionsOpened: async () => (await fetch(new URL('/sessions-opened', url))).json() as Promise<number>,
    foreignSessionUses: async () => (await fetch(new URL('/foreign-session-uses', url))).json() as Promise<number>,
    stop: () => child.stop(),
  };
}
