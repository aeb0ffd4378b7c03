/**
 * The embedded development default (SPEC §3): what runs when there is no config file.
 * In-memory state, the built-in development issuer, one demo backend, loopback only.
 */
import { parseConfig } from './load.js';
import type { Config, ConfigInput } from './schema.js';

export const DEV_AUDIENCE_PATH = '/mcp';

export function developmentConfig(options: { port: number; demoBackendUrl: string }): Config {
  return parseConfig(developmentConfigFile(options));
}

/** The default as a config file would hold it, before validation (the JSON Schema's tests read it too). */
export function developmentConfigFile(options: { port: number; demoBackendUrl: string }): ConfigInput {
  const origin = `http://127.0.0.1:${options.port}`;
  return {
    publicUrl: origin,
    listen: { host: '127.0.0.1', port: options.port },
    allowedHosts: [`localhost:${options.port}`],
    allowedOrigins: [`http://localhost:${options.port}`],
    auth: {
      issuer: `${origin}/dev-issuer`,
      audience: `${origin}${DEV_AUDIENCE_PATH}`,
      algorithms: ['ES256'],
    },
    sessions: { idleTtl: '24h' },
    log: { level: 'info' },
    backends: [{ name: 'everything', url: options.demoBackendUrl, timeout: '120s' }],
  };
}
