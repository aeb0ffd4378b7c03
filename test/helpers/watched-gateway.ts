/**
 * An in-process gateway started from a config file and watching it as `switchboard --config`
 * does (src/reload/config-watch.ts), for the reload tests of issue 41 §6: the file is a plain
 * file in a directory of its own, or a ConfigMap-style mount (config-map.ts). Its log lines
 * are kept; its reload counts are read from its own `/metrics`.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { watchConfigFile, type ConfigWatch } from '../../src/reload/config-watch.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { MountedConfigMap } from './config-map.js';
import { freePort } from './free-port.js';
import { captureLogLines } from './log-lines.js';
import { reloadCount } from './reload-replicas.js';

export interface WatchedGateway {
  url: string;
  audience: string;
  server: RunningServer;
  /** The file the gateway was started with and watches. */
  file: string;
  /** Its first config as written in the file; spread it to write a changed one. */
  input: ConfigInput;
  /** Every JSON log line so far. */
  lines: string[];
  reloads(outcome: string): Promise<number>;
  /** For a ConfigMap mount: the kubelet's `..data` swap to this text. */
  swap(text: string): Promise<void>;
  close(): Promise<void>;
}

/** `change(base)` is the first config; `base` holds publicUrl, listen, auth and log (level info). */
export async function startWatchedGateway(issuer: string, change: (base: ConfigInput) => ConfigInput, mount: 'plain' | 'config-map' = 'plain'): Promise<WatchedGateway> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const audience = `${url}/mcp`;
  const base = { publicUrl: url, listen: { host: '127.0.0.1', port }, auth: { issuer, audience, algorithms: ['RS256', 'ES256'] }, log: { level: 'info' } } as ConfigInput;
  const input = change(base);
  let file: string;
  let map: MountedConfigMap | undefined;
  let dir: string | undefined;
  if (mount === 'config-map') {
    map = await MountedConfigMap.create(stringify(input));
    file = map.file;
  } else {
    dir = await mkdtemp(join(tmpdir(), 'sb-watched-'));
    file = join(dir, 'switchboard.yaml');
    await writeFile(file, stringify(input));
  }
  const logs = captureLogLines();
  const server = await startServer(parseConfig(input), { logStream: logs.stream });
  const watch: ConfigWatch = watchConfigFile(server.app, { file, env: {} });
  return {
    url,
    audience,
    server,
    file,
    input,
    lines: logs.lines,
    reloads: (outcome) => reloadCount(url, outcome),
    swap: async (text) => {
      if (!map) throw new Error('not a ConfigMap mount');
      await map.update(text);
    },
    close: async () => {
      watch.close();
      await server.close();
      await map?.remove();
      if (dir) await rm(dir, { recursive: true, force: true });
    },
  };
}
