/**
 * When the gateway reads its config file again (issue 32 §1): on `SIGHUP`, and when anything
 * in the file's directory changes. The directory, not the file, is watched because Kubernetes
 * updates a mounted ConfigMap by swapping the `..data` symlink to a new timestamped directory
 * in one rename: the file's own path never changes, so a watch on it would never fire (or
 * would follow the old inode). Changes come in bursts (the swap is several renames, an editor
 * writes and renames), so a reload waits `debounceMs` after the last one.
 *
 * Then a plain file must also have stopped changing (issue 41 §6, file-settle.ts): it is read
 * once it has looked the same for `reload.settle` (2 s), and read again later if it changed
 * while it was being read, so an edit in place written in parts is not applied half-written.
 * A `..data` swap (the path's symlink now reaching another file) is read at once, as is the
 * file on `SIGHUP`, which the operator sends when the edit is done.
 *
 * Only changes that can concern the file count ({@link concernsConfig}): a directory shared with
 * files written all the time (a log, an audit trail, `/tmp`) no longer reads the config again
 * after each of their writes.
 *
 * The file goes through the same loader as at start (`${VAR}` interpolation, the zod schema):
 * a file that would not start the gateway is refused with the very message it would have
 * failed with, naming the key, and the old config keeps serving. Every reload is counted in
 * `switchboard_config_reloads_total{outcome}`.
 */
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ConfigError } from '../config/errors.js';
import { loadConfigFile } from '../config/load.js';
import type { ReloadOutcome } from './apply-config.js';
import { markOf, sameMark, swappedLink, whenSettled, type FileMark, type Settling } from './file-settle.js';

/** Quiet time after the last change in the directory before the file is looked at. */
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
  /** The file as it was when read last, to tell a `..data` swap (another file) from an edit. */
  let read: FileMark = markOf(file);
  /** Reads and applies the file; with `settled`, gives up ('changing') when the file is no longer that one after reading it. */
  const readAndApply = (trigger: 'signal' | 'file', settled?: FileMark): ReloadOutcome | 'failed' | 'changing' => {
    const mark = settled ?? markOf(file);
    const changing = () => settled !== undefined && !sameMark(markOf(file), settled);
    let outcome: ReloadOutcome | 'failed';
    try {
      const next = loadConfigFile(file, env);
      if (changing()) return 'changing';
      read = mark;
      outcome = app.applyConfig(next);
    } catch (err) {
      if (changing()) return 'changing';
      read = mark;
      outcome = err instanceof ConfigError ? 'invalid' : 'failed';
      if (err instanceof ConfigError) log.error({ trigger }, `config reload refused: ${err.message}; the old config keeps serving`);
      else log.error({ trigger, err }, 'config reload failed; the old config keeps serving');
    }
    app.metrics.configReloads.inc({ outcome });
    return outcome;
  };

  let timer: NodeJS.Timeout | undefined;
  let settling: Settling | undefined;
  let lastChange = Date.now();
  const changed = () => {
    lastChange = Date.now();
    clearTimeout(timer);
    settling?.cancel();
    timer = setTimeout(settle, options.debounceMs ?? DEFAULT_DEBOUNCE_MS);
  };
  const readSettled = (mark: FileMark) => {
    settling = undefined;
    if (readAndApply('file', mark) === 'changing') {
      log.debug('config file changed while it was read; waiting for it to settle again');
      changed();
    }
  };
  const settle = () => {
    const now = markOf(file);
    // A ConfigMap's `..data` swap: another file, written whole before the rename.
    if (swappedLink(file, now, read)) return readSettled(now);
    settling = whenSettled(file, app.mcp.config.reload.settle, lastChange, readSettled);
  };
  let watcher: FSWatcher | undefined;
  try {
    const name = basename(file);
    watcher = watch(dirname(file), { persistent: false }, (_event, entry) => {
      // The file the path reached when read last may be another entry of the directory (a symlink to it).
      if (concernsConfig(entry, name) || (read !== 'missing' && concernsConfig(entry, basename(read.path)))) changed();
    });
    watcher.on('error', (err) => log.warn({ err: err.message }, 'config directory watch failed; reload with SIGHUP'));
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'cannot watch the config directory; reload with SIGHUP');
  }
  const reload = (trigger: 'signal' | 'file') => readAndApply(trigger) as ReloadOutcome | 'failed';
  const onHangup = () => reload('signal');
  process.on('SIGHUP', onHangup);
  return {
    reload,
    close() {
      clearTimeout(timer);
      settling?.cancel();
      watcher?.close();
      process.off('SIGHUP', onHangup);
    },
  };
}

/**
 * Catches a `SIGHUP` that comes before the watch exists. The gateway answers `/readyz` as soon
 * as it listens, and Node's default for `SIGHUP` is to end the process: an operator (or a
 * rollout script) that reloads right after readiness would kill the gateway instead. Installed
 * before the server starts; `release` hands over to the watch and replays a signal it held.
 */
export function holdHangups(): { release(watch: ConfigWatch): void } {
  let held = false;
  const hold = () => {
    held = true;
  };
  process.on('SIGHUP', hold);
  return {
    release(watch) {
      process.off('SIGHUP', hold);
      if (held) watch.reload('signal');
    },
  };
}

/**
 * Whether a change the directory watch reports for `entry` can concern the config file `name`:
 * the file itself (written, replaced by a rename, removed), a name starting with `..` (a
 * ConfigMap's `..data` swap and its timestamped directories, which change what the path
 * reaches without touching it), or no name at all (the platform did not say, so it may).
 * Any other entry is another file of the directory: an editor's swap file is renamed to the
 * file's name when it is saved, and that rename reports the name.
 */
export function concernsConfig(entry: string | Buffer | null, name: string): boolean {
  if (entry === null) return true;
  const changed = typeof entry === 'string' ? entry : entry.toString('utf8');
  return changed === name || changed.startsWith('..');
}
