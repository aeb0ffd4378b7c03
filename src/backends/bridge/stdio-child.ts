/**
 * One stdio backend's child process, spoken to directly (MCP 2025-11-25 "Transports", stdio):
 * the client writes each JSON-RPC message to the child's stdin as one line, and reads the
 * child's messages from its stdout, one per line. Nothing else is in between — no loopback
 * HTTP, no SDK transport, no schema parsing of every message: a line is parsed once, by
 * `JSON.parse`, to be routed, and passed on as the bytes the child wrote.
 *
 * - The child starts with the allow-listed environment and its configured `env`, never the
 *   gateway's own (child-env.ts).
 * - Its stderr is read (a full pipe would stall it), logged at debug, and its tail kept for
 *   the log line when it dies ("The server MAY write UTF-8 strings to its standard error for
 *   logging purposes").
 * - A line that is not JSON, or not a JSON-RPC message, breaks the transport's rule ("The
 *   server MUST NOT write anything to its stdout that is not a valid MCP message"), yet a
 *   stray `console.log` is a common slip: the line is logged and skipped, the session goes
 *   on. A line past the bound ends the child (stdio-lines.ts).
 * - Backpressure both ways: writes wait for stdin's `drain`, and stdout is paused while the
 *   gateway's reader of an answer is behind (`pause`/`resume`).
 * - Stopping follows the transport's shutdown order: close stdin, then SIGTERM, then SIGKILL.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import type { BackendConfig } from '../../config/schema.js';
import { MAX_MESSAGE_BYTES } from '../backend-messages.js';
import { childEnvironment } from './child-env.js';
import type { BridgeLogger } from './logger.js';
import { createLineSplitter } from './stdio-lines.js';

/** How much of a child's stderr is kept for the log line when it dies. */
const STDERR_TAIL_CHARS = 2_000;
/** How long a child may take to exit once its stdin closed, and again after SIGTERM. */
const EXIT_GRACE_MS = 2_000;
/** How much of a line that is not a message the log shows. */
const GARBAGE_SHOWN_CHARS = 200;

/** A message from the child: the parsed object (for routing) and its line as written. */
export interface ChildMessage {
  message: Record<string, unknown>;
  line: Buffer;
}

export interface StdioChildEvents {
  message(received: ChildMessage): void;
  /** The child is gone (exited, killed, or its stdout broke the bound); called once. */
  exit(reason: string): void;
}

export class StdioChild {
  readonly #process: ChildProcessWithoutNullStreams;
  readonly #backend: BackendConfig;
  readonly #log: BridgeLogger;
  #stderrTail = '';
  #exited = false;
  #corked = false;
  readonly #closed: Promise<void>;

  private constructor(process: ChildProcessWithoutNullStreams, backend: BackendConfig, log: BridgeLogger, events: StdioChildEvents) {
    this.#process = process;
    this.#backend = backend;
    this.#log = log;
    this.#closed = new Promise((resolve) => process.once('close', () => resolve()));
    this.#readStdout(events);
    this.#readStderr();
    process.stdin.on('error', (err: Error) => log.debug({ backend: backend.name, pid: process.pid, err: err.message }, 'stdio backend: stdin error'));
    process.once('close', (code, signal) => this.#ended(events, signal ? `the backend process exited (${signal})` : `the backend process exited (code ${code})`));
  }

  /** Starts the child; rejects (nothing left running) when it cannot be spawned. */
  static start(backend: BackendConfig, log: BridgeLogger, events: StdioChildEvents): Promise<StdioChild> {
    const child = spawn(backend.command!, backend.args ?? [], {
      env: childEnvironment(backend.env),
      stdio: ['pipe', 'pipe', 'pipe'],
      shell: false,
      windowsHide: true,
    });
    return new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('spawn', () => {
        child.off('error', reject);
        child.on('error', (err) => log.debug({ backend: backend.name, err: err.message }, 'stdio backend: process error'));
        resolve(new StdioChild(child, backend, log, events));
      });
    });
  }

  get pid(): number | undefined {
    return this.#process.pid;
  }

  get exited(): boolean {
    return this.#exited;
  }

  /** The end of what the child wrote to stderr, for logs. */
  stderrTail(): string {
    return this.#stderrTail.trim();
  }

  /**
   * Writes one message, already a single line of JSON (no embedded newline), and its line
   * break. Resolves once stdin took it (at once, or at its `drain`); rejects when the child
   * is gone.
   */
  write(line: string): Promise<void> {
    const stdin = this.#process.stdin;
    if (this.#exited || !stdin.writable) return Promise.reject(new Error('the backend process is not running'));
    this.#corkUntilTheLoopTurns();
    if (stdin.write(`${line}\n`)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const done = () => {
        stdin.off('drain', done);
        stdin.off('close', done);
        if (this.#exited) reject(new Error('the backend process exited'));
        else resolve();
      };
      stdin.once('drain', done);
      stdin.once('close', done);
    });
  }

  /**
   * Holds stdin's writes until this turn of the event loop has handled every request that is
   * ready, then sends them in one `writev`: under load several calls arrive together, and a
   * system call (and a wake-up of the child) per message was the largest single cost of a call
   * (bench/stdio.ts profile). A lone call waits for nothing but the end of its own turn.
   */
  #corkUntilTheLoopTurns(): void {
    if (this.#corked) return;
    this.#corked = true;
    this.#process.stdin.cork();
    setImmediate(() => {
      this.#corked = false;
      this.#process.stdin.uncork();
    });
  }

  /** Stops reading stdout: the child blocks on its next write until `resume`. */
  pause(): void {
    this.#process.stdout.pause();
  }

  resume(): void {
    if (!this.#exited) this.#process.stdout.resume();
  }

  /** Stops the child: stdin closed, then SIGTERM, then SIGKILL, each after a grace period. */
  async stop(): Promise<void> {
    if (this.#process.exitCode !== null || this.#process.signalCode !== null) return this.#closed;
    this.#process.stdin.end();
    if (await this.#exitsWithin(EXIT_GRACE_MS)) return;
    this.#process.kill('SIGTERM');
    if (await this.#exitsWithin(EXIT_GRACE_MS)) return;
    this.#process.kill('SIGKILL');
    await this.#closed;
  }

  /** Ends the child at once (its output broke the transport's rules). */
  kill(): void {
    this.#process.kill('SIGKILL');
  }

  async #exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
    try {
      return await Promise.race([this.#closed.then(() => true as const), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  #readStdout(events: StdioChildEvents): void {
    const lines = createLineSplitter(MAX_MESSAGE_BYTES);
    const onLine = (line: Buffer) => {
      const message = parseMessage(line);
      if (message) events.message({ message, line });
      else this.#log.warn({ backend: this.#backend.name, pid: this.#process.pid, line: line.toString('utf8', 0, Math.min(line.length, GARBAGE_SHOWN_CHARS)) }, 'stdio backend wrote a line that is not a JSON-RPC message; skipped');
    };
    this.#process.stdout.on('data', (chunk: Buffer) => {
      if (this.#exited) return;
      try {
        lines.feed(chunk, onLine);
      } catch (err) {
        this.#log.warn({ backend: this.#backend.name, pid: this.#process.pid, err: (err as Error).message }, 'stdio backend: stdout broke the transport; stopping the process');
        this.#ended(events, (err as Error).message);
        this.kill();
      }
    });
  }

  #readStderr(): void {
    const decoder = new StringDecoder('utf8');
    this.#process.stderr.on('data', (chunk: Buffer) => {
      const text = decoder.write(chunk);
      this.#stderrTail = (this.#stderrTail + text).slice(-STDERR_TAIL_CHARS);
      this.#log.debug({ backend: this.#backend.name, pid: this.#process.pid, stderr: text.trimEnd() }, 'stdio backend stderr');
    });
  }

  #ended(events: StdioChildEvents, reason: string): void {
    if (this.#exited) return;
    this.#exited = true;
    events.exit(reason);
  }
}

/** The line as a JSON-RPC message object (a request, notification or response), else undefined. */
function parseMessage(line: Buffer): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const message = value as Record<string, unknown>;
  return message.jsonrpc === '2.0' && (typeof message.method === 'string' || 'result' in message || 'error' in message) ? message : undefined;
}
