/** Starts test/fixtures/resumable-backend.ts as a child process (see there for why it exists). */
import { fileURLToPath } from 'node:url';
import { spawnChild } from './child.js';
import { nodeEntry } from './node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/resumable-backend.ts', import.meta.url));

export async function startResumableBackend(): Promise<{ url: string; stop(): Promise<void> }> {
  const child = await spawnChild({
    name: 'resumable backend',
    command: process.execPath,
    args: nodeEntry(FIXTURE),
    env: { PORT: '0', NODE_OPTIONS: '' },
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
  return { url: (JSON.parse(child.readyLine!) as { url: string }).url, stop: () => child.stop() };
}
