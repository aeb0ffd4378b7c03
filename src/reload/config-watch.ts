/**
 * When the gateway reads its config file again (issue 32 §1): on `SIGHUP`, and when anything
 * in the file's directory changes. The directory, not the file, is watched because Kubernetes
 * updates a mounted ConfigMap by swapping the `..data` symlink to a new timestamped directory
 * in one rename: the file's own path never changes, so a watch on it would never fire (or
 * would follow the old inode). Changes come in bursts (the swap is several renames, an editor
 * writes and renames), so a reload waits `debounceMs` after the last one.
 *
 * The file goes through the same loader as at start (`${VAR}` interpolation, the zod schema):
 * a file that would not start the gateway is refused with the very message it would have
 * failed with, naming the key, and the old config keeps serving. Every reload is counted in
 * `switchboard_config_reloads_total{outcome}`.
 */
import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ConfigError } from '../config/errors.js';
import { loadConfigFile } from '../config/load.js';
import type { ReloadOutcome } from './apply-config.js';

/** Quiet time after the last change in the directory before the file is read. */
export const DEFAULT_DEBOUNCE_MS = 250;

export interface ConfigWatchOptions {
  file: string;
  /** The environment `${VAR}` references are read from (the process's, as at start). */
  env: NodeJS.ProcessEnv;
  debounceMs?: number;
}

export interface ConfigWatch {
  /** Reads the file now and applies it; the outcome is also counted and logged. */
  reload(trigger: 'signal' | 'file'): ReloadOutcome | 'failed';
  close(): void;
}

export function watchConfigFile(app: FastifyInstance, options: ConfigWatchOptions): ConfigWatch {
  const { file, env } = options;
  const log = app.log.child({ configFile: file });
  const reload = (trigger: 'signal' | 'file'): ReloadOutcome | 'failed' => {
    let outcome: ReloadOutcome | 'failed';
    try {
      outcome = app.applyConfig(loadConfigFile(file, env));
    } catch (err) {
      outcome = err instanceof ConfigError ? 'invalid' : 'failed';
      if (err instanceof ConfigError) log.error({ trigger }, `config reload refused: ${err.message}; the old config keeps serving`);
      else log.error({ trigger, err }, 'config reload failed; the old config keeps serving');
    }
    app.metrics.configReloads.inc({ outcome });
    return outcome;
  };

  let timer: NodeJS.Timeout | undefined;
  const changed = () => {
    clearTimeout(timer);
    timer = setTimeout(() => reload('file'), options.debounceMs ?? DEFAULT_DEBOUNCE_MS);
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(file), { persistent: false }, changed);
    watcher.on('error', (err) => log.warn({ err: err.message }, 'config directory watch failed; reload with SIGHUP'));
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'cannot watch the config directory; reload with SIGHUP');
  }
  const onHangup = () => reload('signal');
  process.on('SIGHUP', onHangup);
  return {
    reload,
    close() {
      clearTimeout(timer);
      watcher?.close();
      process.off('SIGHUP', onHangup);
    },
  };
}
