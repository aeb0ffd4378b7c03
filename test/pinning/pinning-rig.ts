/**
 * What the pinning end-to-end tests share (pinning.e2e.test.ts, pin-scope.e2e.test.ts):
 * `switchboard pins …` as a process of its own, a counter summed over the replicas' metrics
 * listeners, every page of a session's tool list, and replicas whose config files (with a
 * metrics listener and the admin route) the CLI can be pointed at.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { freePort } from '../helpers/free-port.js';
import { startReplicas, type ReplicaOptions, type ReplicaSet } from '../helpers/replicas.js';
import { nodeEntry } from '../helpers/node-entry.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Runs `switchboard pins …` as its own process. */
export function pins(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...nodeEntry(join(ROOT, 'src/cli.ts')), 'pins', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: '' }, timeout: 30_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

export interface PinningReplicas {
  set: ReplicaSet;
  /** Each replica's config file (for `switchboard pins --config`). */
  configFiles: string[];
  /** Each replica's metrics listener (`/metrics`, `/admin/pins/approve`). */
  metricsUrls: string[];
}

/** Replicas with a metrics listener each, their config files in `dir` named `{name}-{index}.yaml`. */
export async function startPinningReplicas(dir: string, name: string, options: Omit<ReplicaOptions, 'writeConfig'>): Promise<PinningReplicas> {
  const configFiles: string[] = [];
  const metricsUrls: string[] = [];
  const ports = await Promise.all(Array.from({ length: options.count }, () => freePort()));
  const set = await startReplicas({
    ...options,
    writeConfig: async (index, config) => {
      const file = join(dir, `${name}-${index}.yaml`);
      metricsUrls[index] = `http://127.0.0.1:${ports[index]}`;
      await writeFile(file, stringify({ ...config, metrics: { listen: { host: '127.0.0.1', port: ports[index] } } }));
      configFiles[index] = file;
      return file;
    },
  });
  return { set, configFiles, metricsUrls };
}

/** A counter's series (`name{labels}` exactly as exposed) summed over the replicas. */
export async function counted(metricsUrls: readonly string[], series: string): Promise<number> {
  let sum = 0;
  for (const url of metricsUrls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    sum += line ? Number(line.split(' ').pop()) : 0;
  }
  return sum;
}

/** Waits (bounded) until `check` resolves true. */
export async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`timed out waiting for ${what}`);
}

export type Listed = { tools: Array<{ name: string; description?: string; inputSchema?: { properties?: Record<string, unknown> } }> };

/** Every page of a session's tool list (`/mcp` answers a page per member). */
export async function allTools(client: Client): Promise<Listed['tools']> {
  const tools: Listed['tools'] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 20; page++) {
    const listed = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...listed.tools);
    cursor = listed.nextCursor;
    if (cursor === undefined) return tools;
  }
  assert.fail('more than 20 pages');
}

/** `POST /admin/pins/approve` on a metrics listener. */
export const approveRoute = (metricsUrl: string, body: unknown, token?: string) =>
  fetch(`${metricsUrl}/admin/pins/approve`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
