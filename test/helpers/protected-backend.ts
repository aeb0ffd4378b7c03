/** Starts test/fixtures/protected-backend.ts: an MCP server that takes only one provider's tokens for tool calls. */
import { fileURLToPath } from 'node:url';
import { spawnChild } from './child.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/protected-backend.ts', import.meta.url));
const TSX = import.meta.resolve('tsx');

export interface ProtectedBackend {
  url: string;
  /** Every Authorization header the backend received, in order. */
  seenAuthorizations(): Promise<string[]>;
  stop(): Promise<void>;
}

export async function startProtectedBackend(providerIssuer: string): Promise<ProtectedBackend> {
  const child = await spawnChild({
    name: 'protected backend',
    command: process.execPath,
    args: ['--import', TSX, FIXTURE],
    env: { PORT: '0', PROVIDER_ISSUER: providerIssuer, NODE_OPTIONS: '' },
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
  const url = (JSON.parse(child.readyLine!) as { url: string }).url;
  return {
    url,
    seenAuthorizations: async () => (await fetch(new URL('/seen-authorizations', url))).json() as Promise<string[]>,
    stop: () => child.stop(),
  };
}
