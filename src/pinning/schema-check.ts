/**
 * A call's arguments checked against a pinned `inputSchema` (hold mode, issue 41 §4) without
 * the backend's schema ever running on the event loop: a pattern like `"^(a+)+$"` against 28
 * a's and a `!` once blocked the gateway for seconds (every `/healthz` with it), and a schema
 * of nested `anyOf` is exponential in the depth of a user's input whatever the regex engine.
 *
 * The check runs on one worker thread (schema-worker.ts: an ajv instance per schema, patterns
 * on RE2), one check at a time, each within {@link CHECK_TIMEOUT_MS} from the moment the worker
 * takes it: past that the worker is ended (the only way to stop a running validation), the
 * check answers that it did not finish, and the next check gets a fresh worker. Every failure —
 * invalid input, a schema that cannot be checked, the deadline, the worker lost — is a
 * problem, and the call is refused: never let through unchecked.
 *
 * The worker starts at the first check (its start is not counted against the deadline), holds
 * no reference on the process, and is shared by every pinned backend of the process.
 */
import { Worker } from 'node:worker_threads';
import type { CheckAnswer, CheckJob } from './schema-worker.js';

/** How long one check may run on the worker. */
export const CHECK_TIMEOUT_MS = 1_000;
/** Checks waiting for the worker beyond this are refused at once (a flood of slow calls must not queue without end). */
export const MAX_WAITING = 256;

interface Pending {
  job: CheckJob;
  resolve: (problem: string | undefined) => void;
}

/** The worker's entry: from source (tests, `npm start`) through tsx, which a worker does not inherit on Node 20. */
function workerSource(): string {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return `import(${JSON.stringify(new URL('./schema-worker.js', here).href)})`;
  const entry = JSON.stringify(new URL('./schema-worker.ts', here).href);
  return `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((tsx) => { tsx.register(); return import(${entry}); })`;
}

export class SchemaChecker {
  readonly #keys = new WeakMap<object, number>();
  #nextKey = 0;
  #seq = 0;
  readonly #waiting: Pending[] = [];
  #worker: Worker | undefined;
  #ready = false;
  #running: (Pending & { timer: NodeJS.Timeout }) | undefined;

  constructor(private readonly timeoutMs = CHECK_TIMEOUT_MS) {}

  /** Why `input` fails `schema` (or could not be checked); undefined when it is valid. */
  check(schema: object, input: unknown): Promise<string | undefined> {
    if (this.#waiting.length >= MAX_WAITING) return Promise.resolve('too many argument checks are waiting; retry shortly');
    let key = this.#keys.get(schema);
    if (key === undefined) this.#keys.set(schema, (key = this.#nextKey++));
    return new Promise((resolve) => {
      this.#waiting.push({ job: { seq: this.#seq++, key, schema, input }, resolve });
      this.#next();
    });
  }

  /** Ends the worker; checks waiting are answered as not done. */
  async close(): Promise<void> {
    const worker = this.#worker;
    for (const p of this.#waiting.splice(0)) p.resolve('the gateway is closing');
    this.#lost('the gateway is closing');
    await worker?.terminate();
  }

  #next(): void {
    if (this.#running || !this.#waiting.length) return;
    if (!this.#worker) return this.#start();
    if (!this.#ready) return;
    const pending = this.#waiting.shift()!;
    const timer = setTimeout(() => this.#timedOut(), this.timeoutMs);
    this.#running = { ...pending, timer };
    try {
      this.#worker.postMessage(pending.job);
    } catch (err) {
      this.#finish(`its arguments could not be passed to the check: ${(err as Error).message}`);
    }
  }

  #start(): void {
    const worker = new Worker(workerSource(), { eval: true, resourceLimits: { maxOldGenerationSizeMb: 256 } });
    worker.unref();
    this.#worker = worker;
    this.#ready = false;
    worker.on('message', (m: CheckAnswer | { ready: true }) => {
      if (worker !== this.#worker) return;
      if ('ready' in m) {
        this.#ready = true;
        return this.#next();
      }
      if (m.seq === this.#running?.job.seq) this.#finish(m.problem);
    });
    worker.on('error', (err) => this.#failed(worker, `the argument check failed: ${err.message}`));
    worker.on('exit', () => this.#failed(worker, 'the argument check stopped'));
  }

  /** The worker broke: the running check fails; without ever starting, so do all waiting (no restart loop). */
  #failed(worker: Worker, problem: string): void {
    if (worker !== this.#worker) return;
    const started = this.#ready;
    this.#lost(problem);
    if (!started) for (const p of this.#waiting.splice(0)) p.resolve(problem);
    this.#next();
  }

  #timedOut(): void {
    const worker = this.#worker;
    this.#lost(`the check against its pinned inputSchema did not finish within ${this.timeoutMs} ms`);
    void worker?.terminate();
    this.#next();
  }

  /** Forgets the worker and answers the running check with `problem`. */
  #lost(problem: string): void {
    this.#worker = undefined;
    this.#ready = false;
    this.#finish(problem);
  }

  #finish(problem: string | undefined): void {
    const running = this.#running;
    if (!running) return;
    this.#running = undefined;
    clearTimeout(running.timer);
    running.resolve(problem);
    this.#next();
  }
}

/** The process's checker, shared by every pinned backend. */
export const schemaChecks = new SchemaChecker();
