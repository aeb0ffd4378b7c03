#!/usr/bin/env node
/**
 * `switchboard [--config file.yaml]` (SPEC §3). With a config file: validate it and serve,
 * and reload it on SIGHUP or when it changes (src/reload/).
 * Without one: the embedded development default, which prints the endpoint and a ready
 * bearer token. `switchboard validate --config file.yaml` only validates (issue 32 §2), and
 * `--version` prints the package version; both load neither the server nor its dependencies,
 * so they start nothing. `switchboard pins …` reads and approves tool-definition pins in the
 * store the replicas share (src/pinning/pins-command.ts): it connects to Redis, serves nothing.
 */
import { ConfigError } from './config/errors.js';
import { findConfigFile, loadConfigFile } from './config/load.js';
import { validateConfigFile } from './config/validate.js';
import { packageVersion } from './ops/version.js';

const USAGE = `usage:
  switchboard [--config <file.yaml>]           serve (no file: the development default)
  switchboard [--port <n>]                     the development default on this port
  switchboard validate [--config <file.yaml>]  check the file as the start would; exit 0 or 1
  switchboard pins <export|list|approve> ...   tool-definition pins (switchboard pins --help)
  switchboard --version                        print the version
  switchboard --help                           print this
`;

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE);
    return;
  }
  if (argv.includes('--version') || argv.includes('-v')) {
    process.stdout.write(`${packageVersion()}\n`);
    return;
  }
  if (argv[0] === 'validate') {
    const file = findConfigFile(argv.slice(1), process.env);
    if (!file) throw new ConfigError([], 'validate needs a config file: --config <file.yaml>, $SWITCHBOARD_CONFIG or ./switchboard.yaml');
    process.stdout.write(`${validateConfigFile(file, process.env).join('\n')}\n`);
    return;
  }
  if (argv[0] === 'pins') {
    const { PINS_USAGE, runPinsCommand } = await import('./pinning/pins-command.js');
    process.stdout.write(argv[1] === '--help' || argv.length === 1 ? PINS_USAGE : `${await runPinsCommand(argv.slice(1), process.env)}\n`);
    return;
  }
  const { closeOnSignals, startServer } = await import('./server.js');
  const file = findConfigFile(argv, process.env);
  if (!file) {
    const { startDevelopment } = await import('./dev/development.js');
    await startDevelopment(argv, { start: startServer, closeOnSignals });
    return;
  }
  const config = loadConfigFile(file, process.env);
  // Reloads on SIGHUP and when the file's directory changes (docs/operations-reload.md); a
  // SIGHUP between listening and the watch is held, not left to end the process.
  const { holdHangups, watchConfigFile } = await import('./reload/config-watch.js');
  const early = holdHangups();
  const server = await startServer(config);
  const watch = watchConfigFile(server.app, { file, env: process.env });
  early.release(watch);
  closeOnSignals(server, async () => watch.close());
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`switchboard: ${err instanceof ConfigError ? err.message : ((err as Error)?.stack ?? String(err))}\n`);
  process.exit(1);
});
