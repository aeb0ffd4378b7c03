/**
 * Waiting until a changed config file is finished before it is read (issue 41 §6).
 *
 * An edit in place (`>`, `cp`, many editors) truncates the file and writes it in parts. The
 * directory watch cannot tell the last part from a pause between two: a first part cut just
 * before `policy:` is a valid config without the deny rules, and reading it 250 ms after the
 * last event applied it. So a plain file is read only once it has stayed the same — the file
 * its path reaches, its inode, size, mtime and ctime — for `reload.settle` (default 2 s).
 * A pause between two writes longer than that still looks finished: no stat can tell, which
 * is why docs/operations-reload.md asks for a finished file moved into place (`mv`, one rename).
 *
 * A ConfigMap's `..data` swap is read at once: the path is a symlink that now reaches another
 * file, written whole by the kubelet before the swap, in one rename.
 */
import { lstatSync, realpathSync, statSync } from 'node:fs';

/** What a file is on disk now; `missing` while there is none (between a delete and a create). */
export type FileMark = { path: string; ino: number; size: number; mtimeMs: number; ctimeMs: number } | 'missing';

export function markOf(file: string): FileMark {
  try {
    const path = realpathSync(file);
    const { ino, size, mtimeMs, ctimeMs } = statSync(path);
    return { path, ino, size, mtimeMs, ctimeMs };
  } catch {
    return 'missing';
  }
}

export function sameMark(a: FileMark, b: FileMark): boolean {
  if (a === 'missing' || b === 'missing') return a === b;
  return a.path === b.path && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs;
}

/** The path is a symlink now reaching another file than the one read last: a ConfigMap's `..data` swap, finished by design. */
export function swappedLink(file: string, now: FileMark, read: FileMark): boolean {
  if (now === 'missing' || read === 'missing' || now.path === read.path) return false;
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

/** How often the file is looked at while it settles: a fifth of the window, between 20 and 250 ms. */
export const pollEvery = (settleMs: number): number => Math.min(250, Math.max(20, Math.round(settleMs / 5)));

export interface Settling {
  /** Stops looking (another change came, or the watch closes). */
  cancel(): void;
}

/**
 * Calls `settled` once the file has looked the same for `settleMs`, counted from `since` (the
 * last change the watch saw) or from the last difference a look found; looks every
 * {@link pollEvery}. The mark it settled on is handed over, to be checked again after reading.
 */
export function whenSettled(file: string, settleMs: number, since: number, settled: (mark: FileMark) => void): Settling {
  let mark = markOf(file);
  let stableFrom = since;
  let timer: NodeJS.Timeout | undefined;
  const look = () => {
    const now = markOf(file);
    if (!sameMark(now, mark)) [mark, stableFrom] = [now, Date.now()];
    const left = stableFrom + settleMs - Date.now();
    if (left <= 0) settled(mark);
    else timer = setTimeout(look, Math.min(left, pollEvery(settleMs)));
  };
  look();
  return { cancel: () => clearTimeout(timer) };
}
