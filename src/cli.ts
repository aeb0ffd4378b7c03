#!/usr/bin/env node
/**
 * `switchboard [--config file.yaml]` (SPEC §3). With a config file: validate it and serve,
 * and reload it on SIGHUP or when it changes (src/reload/).
 * Without one: the embedded development default, which prints the endpoint and a ready
 * bearer token.
 */
import { startDevelopment } from './dev/development.js';
import { ConfigError } from './config/errors.js';
import { findConfigFile, loadConfigFile } from './config/load.js';
import { closeOnSignals, startServer } from './server.js';
import { watchConfigFile } from './reload/config-watch.js';

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write('usage: switchboard [--config <file.yaml>] [--port <n> (development default only)]\n');
    return;
  }
  const file = findConfigFile(argv, process.env);
  if (!file) {
    await startDevelopment(argv, { start: startServer, closeOnSignals });
    return;
  }
  const config = loadConfigFile(file, process.env);
  const server = await startServer(config);
  // Reloads on SIGHUP and when the file's directory changes (docs/operations-reload.md).
  const watch = watchConfigFile(server.app, { file, env: process.env });
  closeOnSignals(server, async () => watch.close());
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`switchboard: ${err instanceof ConfigError ? err.message : ((err as Error)?.stack ?? String(err))}\n`);
  process.exit(1);
});
