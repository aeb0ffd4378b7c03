/**
 * Starts Switchboard in-process on a free loopback port for integration tests, with a
 * config built the way an operator would write it (parsed by the real config loader).
 */
import type { FastifyInstance } from 'fastify';
import { parseConfig } from '../../src/config/load.js';
import type { Config, ConfigInput } from '../../src/config/schema.js';
import { startServer } from '../../src/server.js';
import type { StateStore } from '../../src/state/store.js';
import { freePort } from './free-port.js';

export interface GatewayHandle {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  /** The audience tokens must carry. */
  audience: string;
  config: Config;
  app: FastifyInstance;
  /** `${url}/mcp/${backend}` */
  endpoint(backend: string): URL;
  close(): Promise<void>;
}

export interface GatewayOptions {
  issuer: string;
  backends: ConfigInput['backends'];
  redisUrl?: string;
  store?: StateStore;
  /** Merged over the generated config (top level). */
  overrides?: Partial<ConfigInput>;
  logStream?: NodeJS.WritableStream;
  /** Listen on this port (default: a free one). */
  port?: number;
}

export async function startGateway(options: GatewayOptions): Promise<GatewayHandle> {
  const port = options.port ?? (await freePort());
  const url = `http://127.0.0.1:${port}`;
  const audience = `${url}/mcp`;
  const config = parseConfig({
    publicUrl: url,
    listen: { host: '127.0.0.1', port },
    auth: { issuer: options.issuer, audience, algorithms: ['RS256', 'ES256'] },
    ...(options.redisUrl ? { redis: { url: options.redisUrl, keyPrefix: `sbtest${port}:` } } : {}),
    log: { level: 'silent' },
    backends: options.backends,
    ...options.overrides,
  });
  const server = await startServer(config, { store: options.store, logStream: options.logStream });
  return {
    url,
    audience,
    config,
    app: server.app,
    endpoint: (backend) => new URL(`${url}/mcp/${backend}`),
    close: () => server.close(),
  };
}
