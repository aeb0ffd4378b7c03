/**
 * `switchboard validate --config <file>` (issue 32 §2): the start's own validation and
 * nothing else. It runs loadConfigFile, so a file is refused with exactly the message the
 * start would print (SPEC §3: the key and the problem), `${VAR}` references are resolved
 * against the environment given, and nothing is started: no listener, no Redis, no backend,
 * no identity provider is contacted. On success it says what the file configures, without
 * any value that could be a secret (no URL credentials, no keys).
 */
import { loadConfigFile } from './load.js';
import type { Config } from './schema.js';

/** Validates the file like the start does; throws its ConfigError, else returns the summary lines. */
export function validateConfigFile(file: string, env: NodeJS.ProcessEnv): string[] {
  return summarize(file, loadConfigFile(file, env));
}

function summarize(file: string, config: Config): string[] {
  const backends = config.backends.map((b) => `${b.name} (${b.transport})`);
  return [
    `${file}: OK`,
    `  publicUrl: ${withoutCredentials(config.publicUrl)}`,
    `  listen: ${config.listen.host}:${config.listen.port}`,
    `  auth: ${config.auth.mode}, issuer ${withoutCredentials(config.auth.issuer)}`,
    `  state: ${config.redis ? `redis (${config.redis.mode})` : 'in memory (one replica)'}`,
    `  backends (${backends.length}): ${backends.join(', ')}`,
  ];
}

/** A URL as it may be printed: user and password (which http URLs can carry) left out. */
function withoutCredentials(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.href.replace(/\/$/, '');
}
