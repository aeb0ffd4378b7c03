/**
 * Finding, reading and validating the config file (SPEC §3): `--config <file>`, else
 * `$SWITCHBOARD_CONFIG`, else `./switchboard.yaml`; none of these → the embedded
 * development default (config/default.ts). Validation happens here, at start and on each reload (src/reload/).
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseYaml } from './yaml.js';
import { ConfigError } from './errors.js';
import { interpolate } from './interpolate.js';
import { configSchema, type Config } from './schema.js';

/** Returns the config file to load, or undefined when the embedded default applies. */
export function findConfigFile(argv: readonly string[], env: NodeJS.ProcessEnv, cwd = process.cwd()): string | undefined {
  const flag = argv.indexOf('--config');
  if (flag !== -1) {
    const file = argv[flag + 1];
    if (!file) throw new ConfigError([], '--config needs a file name');
    return resolve(cwd, file);
  }
  const inline = argv.find((a) => a.startsWith('--config='));
  if (inline) return resolve(cwd, inline.slice('--config='.length));
  if (env.SWITCHBOARD_CONFIG) return resolve(cwd, env.SWITCHBOARD_CONFIG);
  const local = resolve(cwd, 'switchboard.yaml');
  return existsSync(local) ? local : undefined;
}

/** Reads, interpolates and validates a YAML config file. */
export function loadConfigFile(file: string, env: NodeJS.ProcessEnv): Config {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([], `cannot read ${file}: ${(err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new ConfigError([], `${file} is not valid YAML: ${(err as Error).message}`);
  }
  return parseConfig(raw, env);
}

/** Validates an already-parsed config object (after `${VAR}` interpolation). */
export function parseConfig(raw: unknown, env: NodeJS.ProcessEnv = {}): Config {
  const result = configSchema.safeParse(interpolate(raw, env));
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new ConfigError(issue.path, issue.message);
  }
  return result.data;
}
