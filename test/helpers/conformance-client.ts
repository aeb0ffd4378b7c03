/**
 * The official conformance suite's CLIENT scenarios (@modelcontextprotocol/conformance
 * 0.1.16) run through a Switchboard gateway (issue 33): `conformance client --scenario X
 * --command "<node> --import tsx test/fixtures/conformance-client.ts"`, the scenario's
 * servers as the gateway's backend, one gateway per scenario.
 *
 * - CLIENT_SCENARIOS: what the issue counts (draft and extension scenarios left out).
 * - launchSharedBrowser(): Chromium started once with playwright-core's `launchServer`; the
 *   fixture of each scenario connects to its WebSocket endpoint.
 * - runClientScenario(name): the CLI's verdict for one scenario (exit code 0 = OVERALL:
 *   PASSED: no failed or warning check, the client exited 0 unless the scenario allows an
 *   error, no timeout) with its checks from the `-o` directory.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserServer } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, ensureChromium } from './browser.js';
import { CONFORMANCE_CLI, PROJECT_ROOT, runCli, type ConformanceCheck } from './conformance.js';

/** The 20 client scenarios of 0.1.16 for 2025-11-25, 2025-06-18 and 2025-03-26 (`conformance list`). */
export const CLIENT_SCENARIOS: readonly string[] = [
  'initialize',
  'tools_call',
  'elicitation-sep1034-client-defaults',
  'sse-retry',
  'auth/metadata-default',
  'auth/metadata-var1',
  'auth/metadata-var2',
  'auth/metadata-var3',
  'auth/basic-cimd',
  'auth/scope-from-www-authenticate',
  'auth/scope-from-scopes-supported',
  'auth/scope-omitted-when-undefined',
  'auth/scope-step-up',
  'auth/scope-retry-limit',
  'auth/token-endpoint-auth-basic',
  'auth/token-endpoint-auth-post',
  'auth/token-endpoint-auth-none',
  'auth/pre-registration',
  'auth/2025-03-26-oauth-metadata-backcompat',
  'auth/2025-03-26-oauth-endpoint-fallback',
];

const FIXTURE = path.join(PROJECT_ROOT, 'test', 'fixtures', 'conformance-client.ts');

export async function launchSharedBrowser(): Promise<BrowserServer> {
  ensureChromium();
  return chromium.launchServer({ executablePath: CHROMIUM, timeout: 30_000, args: [...CHROMIUM_ARGS] });
}

export interface ClientScenarioResult {
  passed: boolean;
  checks: ConformanceCheck[];
  /** The CLI's output (its summary and the client's stderr when it failed), for diagnostics. */
  output: string;
}

/**
 * Runs one scenario. The fixture reads CONFORMANCE_REDIS_URL, CONFORMANCE_IDP_ISSUER and
 * CONFORMANCE_BROWSER_WS from the environment the CLI passes on (process.env here).
 */
export async function runClientScenario(scenario: string, timeoutMs = 90_000): Promise<ClientScenarioResult> {
  const outDir = await mkdtemp(path.join(tmpdir(), 'sb-conformance-client-'));
  try {
    const command = `${process.execPath} --import tsx ${FIXTURE}`;
    const run = await runCli(CONFORMANCE_CLI, ['client', '--scenario', scenario, '--command', command, '--timeout', String(timeoutMs), '-o', outDir], timeoutMs + 60_000);
    const checks = await readChecks(outDir);
    return { passed: run.exitCode === 0 && checks.length > 0, checks, output: `${run.stdout}\n${run.stderr}` };
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

/** checks.json under the output directory (`auth/<name>-<timestamp>/` for auth scenarios). */
async function readChecks(dir: string): Promise<ConformanceCheck[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  const file = entries.find((e) => e.isFile() && e.name === 'checks.json');
  if (!file) return [];
  const raw = JSON.parse(await readFile(path.join(file.parentPath, file.name), 'utf8')) as Array<{ id: string; status: string; errorMessage?: string; description?: string }>;
  return raw.map((c) => ({ id: c.id, status: c.status, ...(c.errorMessage ?? (c.status !== 'SUCCESS' ? c.description : undefined) ? { errorMessage: c.errorMessage ?? c.description } : {}) }));
}
