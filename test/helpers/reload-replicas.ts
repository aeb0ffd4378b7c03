/**
 * Gateway replicas whose config files are mounted the way Kubernetes mounts a ConfigMap
 * (config-map.ts) and changed by the kubelet's `..data` swap, for the config reload tests
 * (issue 32 §1, docs/operations-reload.md): the swap on every replica, the reload count each
 * replica reports in `switchboard_config_reloads_total{outcome}`, and reading the streams a
 * reload should end or tell something.
 */
import assert from 'node:assert/strict';
import { stringify } from 'yaml';
import { waitUntil } from './child.js';
import { MountedConfigMap } from './config-map.js';
import { startReplicas, type ReplicaOptions, type ReplicaSet } from './replicas.js';
import { SESSION_VERSION } from './session-client.js';
import { messageOf, SseReader, type SseEvent } from './sse-client.js';

export const RELOAD_WAIT_MS = 20_000;

export interface ReloadingReplicas {
  set: ReplicaSet;
  /** Swaps every replica's ConfigMap to its first config with `change`'s top-level keys in place. */
  swapAll(change: Record<string, unknown>): Promise<void>;
  /** Waits until every replica counts at least `count` reloads with `outcome`. */
  allCount(outcome: string, count: number): Promise<void>;
  /** The config file replica `index` was started with (a mounted ConfigMap's `switchboard.yaml`). */
  file(index: number): string;
  /** Every replica's log, for failure messages. */
  logs(): string;
  stop(): Promise<void>;
}

export async function startReloadingReplicas(options: Omit<ReplicaOptions, 'writeConfig'>): Promise<ReloadingReplicas> {
  const maps: MountedConfigMap[] = [];
  const configs: Array<Record<string, unknown>> = [];
  const set = await startReplicas({
    ...options,
    writeConfig: async (index, config) => {
      configs[index] = config;
      maps[index] = await MountedConfigMap.create(stringify(config));
      return maps[index]!.file;
    },
  });
  const logs = () => set.replicas.map((r) => `--- replica ${r.index}\n${r.child.logs()}`).join('\n');
  return {
    set,
    logs,
    file: (index) => maps[index]!.file,
    swapAll: async (change) => {
      await Promise.all(maps.map((m, i) => m.update(stringify({ ...configs[i], ...change }))));
    },
    allCount: (outcome, count) =>
      eventually(`every replica to count ${count} ${outcome} reload(s)`, async () => (await Promise.all(set.replicas.map((r) => reloadCount(r.url, outcome)))).every((n) => n >= count), logs),
    stop: async () => {
      await set.stop();
      await Promise.allSettled(maps.map((m) => m.remove()));
    },
  };
}

/** How many reloads with `outcome` the gateway at `url` counted. */
export async function reloadCount(url: string, outcome: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const match = new RegExp(`^switchboard_config_reloads_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

export async function eventually(what: string, check: () => Promise<boolean>, details?: () => string): Promise<void> {
  await waitUntil(async () => ((await check()) ? true : undefined), { what, timeoutMs: RELOAD_WAIT_MS, intervalMs: 100, details });
}

/** Opens a session's standalone GET stream at `url`. */
export async function openStream(url: URL, token: string, sessionId: string): Promise<SseReader> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': SESSION_VERSION } });
  if (res.status !== 200) assert.fail(`GET stream: HTTP ${res.status} ${await res.text()}`);
  return new SseReader(res);
}

/** Reads a stream to its end (bounded); returns its events. */
export async function untilEnd(stream: SseReader): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  for (let event = await stream.next(RELOAD_WAIT_MS); event; event = await stream.next(RELOAD_WAIT_MS)) events.push(event);
  return events;
}

/** Reads a stream until a message with `method` (and `matches`, if given) arrives; fails if the stream ends first. */
export async function untilMessage(stream: SseReader, method: string, matches: (message: Record<string, unknown>) => boolean = () => true): Promise<Record<string, unknown>> {
  for (;;) {
    const event = await stream.next(RELOAD_WAIT_MS);
    assert.ok(event, `the stream ended (or was quiet for ${RELOAD_WAIT_MS} ms) before ${method} arrived`);
    const message = event.data ? messageOf(event) : undefined;
    if (message?.method === method && matches(message)) return message;
  }
}
