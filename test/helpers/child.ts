/**
 * Child-process plumbing shared by the integration-test helpers (Redis, OAuth
 * server, server-everything).
 *
 * Why this exists: integration tests start REAL programs. A test that hangs
 * forever waiting for a program that crashed at startup, or that leaves a
 * server running after the test file ended, is worse than a failing test. So
 * every child started here:
 *  - must become ready before a deadline (else it is killed and the error
 *    carries its recent output),
 *  - keeps only a bounded amount of its output in memory (for error messages),
 *  - is stopped with SIGTERM, then SIGKILL after a grace period,
 *  - is SIGKILLed when the parent process exits (`process.on('exit')`), and
 *    does not by itself keep the parent's event loop alive (it is unref'd), so
 *    a test file that forgets to stop a child still ends and still reaps it.
 *
 * Limitation: if the parent dies by an uncatchable signal (SIGKILL) no
 * `exit` handler runs. Children spawned with `stdin: 'pipe'` can watch for
 * end-of-stdin to notice that (the OAuth fixture does).
 */
import { spawn, type ChildProcess } from 'node:child_process';

/** Which stream a line came from. */
export type StreamName = 'stdout' | 'stderr';

/** Options for {@link spawnChild}. */
export interface SpawnChildOptions {
  /** Short human name used in error messages ("redis-server", "oauth server"). */
  name: string;
  /** Executable. For Node children pass `process.execPath`, never the bare string `'node'`. */
  command: string;
  args?: readonly string[];
  /** Extra environment merged over `process.env`. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * Readiness predicate, called for every complete output line. The child is
   * "ready" on the first line for which it returns true. When omitted the
   * child counts as ready as soon as it has been spawned (use this when
   * readiness is probed from outside, e.g. a Redis PING).
   */
  ready?: (line: string, stream: StreamName) => boolean;
  /** Deadline for `ready`, in ms. Default 20 000. */
  readyTimeoutMs?: number;
  /** Time between SIGTERM and SIGKILL on stop(), in ms. Default 5 000. */
  stopGraceMs?: number;
  /** Max characters of recent output kept for error messages. Default 64 KiB. */
  logLimit?: number;
  /**
   * 'pipe' keeps a pipe to the child's stdin open for its whole life, so the
   * child can exit when the pipe ends (i.e. when the parent died). Default
   * 'ignore'.
   */
  stdin?: 'pipe' | 'ignore';
}

/** How a child ended. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A started child. */
export interface ChildHandle {
  readonly name: string;
  readonly process: ChildProcess;
  readonly pid: number;
  /** The line that satisfied the readiness predicate, if there was one. */
  readonly readyLine: string | undefined;
  /** Set once the child has exited. */
  readonly exit: ChildExit | undefined;
  /** Resolves when the child has exited (never rejects). */
  readonly exited: Promise<ChildExit>;
  /** The most recent output (stdout and stderr interleaved), bounded by `logLimit`. */
  logs(): string;
  /** SIGTERM, then SIGKILL after the grace period; resolves once the child is gone. Idempotent. */
  stop(): Promise<void>;
}

const DEFAULT_READY_TIMEOUT_MS = 20_000;
const DEFAULT_STOP_GRACE_MS = 5_000;
const DEFAULT_LOG_LIMIT = 64 * 1024;
/** After SIGKILL the kernel reaps promptly; this only bounds a pathological wait. */
const KILL_WAIT_MS = 5_000;

/** Every child that has not exited yet, so the `exit` hook can kill them. */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' handlers must be synchronous; process.kill is.
  process.on('exit', () => {
    for (const child of live) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

/**
 * Keeps the last `limit` characters of output, line by line. A ring of lines
 * rather than one big string so trimming is cheap.
 */
export class BoundedLog {
  #lines: string[] = [];
  #size = 0;
  readonly #limit: number;

  constructor(limit = DEFAULT_LOG_LIMIT) {
    this.#limit = limit;
  }

  push(line: string): void {
    const entry = line.length > this.#limit ? line.slice(line.length - this.#limit) : line;
    this.#lines.push(entry);
    this.#size += entry.length + 1;
    while (this.#size > this.#limit && this.#lines.length > 1) {
      const dropped = this.#lines.shift()!;
      this.#size -= dropped.length + 1;
    }
  }

  toString(): string {
    return this.#lines.join('\n');
  }
}

/** Formats the tail of a child's output for inclusion in an Error message. */
export function describeLogs(name: string, logs: string): string {
  return logs.trim() === '' ? `(${name} printed nothing)` : `--- ${name} output (most recent) ---\n${logs}\n--- end ---`;
}

/**
 * Spawns a child process and waits (bounded by `readyTimeoutMs`) until its
 * readiness predicate matches an output line. Rejects, after killing the
 * child, if it exits first or the deadline passes; the error includes the
 * child's recent output.
 */
export async function spawnChild(opts: SpawnChildOptions): Promise<ChildHandle> {
  installExitHook();
  const log = new BoundedLog(opts.logLimit ?? DEFAULT_LOG_LIMIT);
  const readyTimeoutMs = opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
  const stopGraceMs = opts.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
  const commandLine = [opts.command, ...(opts.args ?? [])].join(' ');

  const child = spawn(opts.command, opts.args ?? [], {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: [opts.stdin ?? 'ignore', 'pipe', 'pipe'],
  });

  let exitInfo: ChildExit | undefined;
  let spawnError: Error | undefined;
  const exited = new Promise<ChildExit>((resolve) => {
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      live.delete(child);
      resolve(exitInfo);
    });
    child.once('error', (err) => {
      // ENOENT etc.: no 'exit' event follows when the spawn itself failed.
      spawnError = err;
      if (child.pid === undefined) {
        exitInfo = { code: null, signal: null };
        resolve(exitInfo);
      }
    });
  });
  if (child.pid !== undefined) live.add(child);

  let readyLine: string | undefined;
  let onLine: ((line: string, stream: StreamName) => void) | undefined;
  const feed = (stream: StreamName) => {
    let partial = '';
    const readable = stream === 'stdout' ? child.stdout : child.stderr;
    readable?.setEncoding('utf8');
    readable?.on('data', (chunk: string) => {
      const parts = (partial + chunk).split(/\r?\n/);
      partial = parts.pop() ?? '';
      for (const line of parts) {
        log.push(stream === 'stderr' ? `[err] ${line}` : line);
        onLine?.(line, stream);
      }
    });
    readable?.on('end', () => {
      if (partial !== '') {
        log.push(stream === 'stderr' ? `[err] ${partial}` : partial);
        onLine?.(partial, stream);
        partial = '';
      }
    });
  };
  feed('stdout');
  feed('stderr');

  // Do not let the child (or its pipes) keep the test process alive; the
  // exit hook kills whatever is left.
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr]) {
    (stream as unknown as { unref?: () => void } | null)?.unref?.();
  }

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (exitInfo) return;
      child.kill('SIGTERM');
      if (await settlesWithin(exited, stopGraceMs)) return;
      child.kill('SIGKILL');
      if (await settlesWithin(exited, KILL_WAIT_MS)) return;
      throw new Error(`${opts.name} (pid ${child.pid}) did not exit ${KILL_WAIT_MS} ms after SIGKILL`);
    })();
    return stopping;
  };

  const handle: ChildHandle = {
    name: opts.name,
    process: child,
    get pid() {
      return child.pid ?? -1;
    },
    get readyLine() {
      return readyLine;
    },
    get exit() {
      return exitInfo;
    },
    exited,
    logs: () => log.toString(),
    stop,
  };

  const failure = (why: string) =>
    new Error(`${opts.name} ${why}\ncommand: ${commandLine}\n${describeLogs(opts.name, log.toString())}`);

  const predicate = opts.ready;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(failure(`was not ready within ${readyTimeoutMs} ms`)),
        readyTimeoutMs,
      );
      const done = (fn: () => void) => {
        clearTimeout(timer);
        onLine = undefined;
        fn();
      };
      void exited.then((how) => {
        const reason = spawnError
          ? `could not be started: ${spawnError.message}`
          : `exited before it was ready (code ${how.code}, signal ${how.signal})`;
        done(() => reject(failure(reason)));
      });
      if (predicate === undefined) {
        child.once('spawn', () => done(resolve));
        return;
      }
      onLine = (line, stream) => {
        let matched = false;
        try {
          matched = predicate(line, stream);
        } catch (err) {
          done(() => reject(failure(`readiness check threw: ${(err as Error).message}`)));
          return;
        }
        if (matched) {
          readyLine = line;
          done(resolve);
        }
      };
    });
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  return handle;
}

/** Resolves true if `p` settles within `ms`, false otherwise; never leaves a timer behind. */
export async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([p.then(() => true as const, () => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Options for {@link waitUntil}. */
export interface WaitUntilOptions {
  /** What is being waited for, used in the timeout error ("Redis PING on 127.0.0.1:6379"). */
  what: string;
  /** Deadline in ms. */
  timeoutMs: number;
  /** Pause between attempts in ms. Default 100. */
  intervalMs?: number;
  /** Extra context appended to the timeout error (e.g. a child's logs). */
  details?: () => string;
}

/**
 * Polls `attempt` until it returns a value other than `undefined`, or the
 * deadline passes. An attempt that throws counts as "not yet" (its last error
 * is reported on timeout) unless it throws a {@link GiveUp}, which aborts at
 * once — use that when the thing being waited for is known to be dead.
 * Lives here because every child-based helper needs "probe from outside
 * until ready" in addition to the line predicate.
 */
export async function waitUntil<T>(
  attempt: () => Promise<T | undefined>,
  opts: WaitUntilOptions,
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.intervalMs ?? 100;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await attempt();
      if (value !== undefined) return value;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const last = lastError instanceof Error ? `\nlast error: ${lastError.message}` : '';
      const details = opts.details ? `\n${opts.details()}` : '';
      throw new Error(`Timed out after ${opts.timeoutMs} ms waiting for ${opts.what}${last}${details}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(interval, Math.max(0, deadline - Date.now()))));
  }
}

/** Thrown from a {@link waitUntil} attempt to stop waiting immediately. */
export class GiveUp extends Error {
  override name = 'GiveUp';
}
