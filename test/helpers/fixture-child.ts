/**
 * A backend fixture run as a child process (test/fixtures/*-backend.ts): started (nodeEntry) on a
 * free port, ready once it prints its {"url": …} line; the handle stops it.
 */
import { fileURLToPath } from 'node:url';
import { spawnChild, type ChildHandle } from './child.js';
import { nodeEntry } from './node-entry.js';

export interface FixtureChild {
  child: ChildHandle;
  /** The fixture's MCP endpoint. */
  url: string;
}

/** Starts `test/fixtures/<file>` and waits for its ready line. */
export async function startFixtureChild(file: string): Promise<FixtureChild> {
  const child = await spawnChild({
    name: file,
    command: process.execPath,
    args: nodeEntry(fileURLToPath(new URL(`../fixtures/${file}`, import.meta.url))),
    env: { PORT: '0', NODE_OPTIONS: '' },
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
  return { child, url: (JSON.parse(child.readyLine!) as { url: string }).url };
}
