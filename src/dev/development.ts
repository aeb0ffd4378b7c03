/**
 * Starts the embedded development default and tells the newcomer how to use it: the
 * endpoint, a bearer token minted by the development issuer, and a client command. The
 * server itself is started through the functions cli.ts hands in (the root wires; dev/ sits
 * below it and does not import it).
 */
import { createDevIssuer } from '../auth/dev-issuer.js';
import { developmentConfig } from '../config/default.js';
import { ConfigError } from '../config/errors.js';
import type { JWTVerifyGetKey } from 'jose';
import type { Config } from '../config/schema.js';
import { startDemoBackend } from './demo-backend.js';

const TOKEN_TTL_SECONDS = 12 * 3600;

/** How the development default starts and stops the gateway (server.ts). */
export interface ServerControl<S> {
  start(config: Config, options: { keySet: JWTVerifyGetKey }): Promise<S>;
  closeOnSignals(server: S, onClosed: () => Promise<void>): void;
}

export async function startDevelopment<S>(argv: readonly string[], { start, closeOnSignals }: ServerControl<S>): Promise<void> {
  const port = portFrom(argv);
  const demo = await startDemoBackend();
  const config = developmentConfig({ port, demoBackendUrl: demo.url });
  const issuer = await createDevIssuer(config.auth.issuer);
  let server;
  try {
    server = await start(config, { keySet: issuer.keySet });
  } catch (err) {
    await demo.stop();
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new ConfigError([], `port ${port} is in use; start with --port <n>`);
    throw err;
  }
  closeOnSignals(server, () => demo.stop());
  const token = await issuer.mint({ sub: 'dev-user', aud: config.auth.audience, ttlSeconds: TOKEN_TTL_SECONDS });
  const endpoint = `${config.publicUrl}/mcp/everything`;
  process.stdout.write(
    [
      '',
      'Switchboard is running with the embedded development default (in-memory state, demo backend, loopback only).',
      '',
      `  MCP endpoint:  ${endpoint}`,
      `  Bearer token:  ${token}`,
      `                 (sub "dev-user", valid ${TOKEN_TTL_SECONDS / 3600} h)`,
      '',
      'Try it (initialize a session):',
      `  curl -si ${endpoint} -H "Authorization: Bearer ${token}" \\`,
      `    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\`,
      `    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'`,
      '',
      'Any MCP client works the same way: Streamable HTTP at the endpoint above, with the header',
      `  Authorization: Bearer ${token}`,
      '',
      'Stop with Ctrl-C. Use --config <file.yaml> for a real deployment (see README).',
      '',
    ].join('\n'),
  );
}

function portFrom(argv: readonly string[]): number {
  const i = argv.indexOf('--port');
  if (i === -1) return 8080;
  const port = Number(argv[i + 1]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError([], '--port needs a port number');
  return port;
}
