/**
 * The official conformance suite's CLIENT scenarios (@modelcontextprotocol/conformance
 * 0.1.16, and 0.2.0-alpha.11's new 2026-07-28 ones) run through a Switchboard gateway (issue 33): `conformance client --scenario X
 * --command "<node> test/fixtures/conformance-client-shim.mjs"`, the scenario's servers as the
 * gateway's backend, one gateway per scenario; the shim hands each journey to this process
 * (conformance-fixture-host.ts), which runs it (test/fixtures/conformance-journey.ts).
 *
 * - CLIENT_SCENARIOS_2026: the 2026-07-28 ones (issue 42), each with either era's user;
 *   CLIENT_SCENARIOS_DPOP: the DPoP extension's two (issue 42 cause 12), run beside them.
 * - CLIENT_SCENARIOS: what the issue counts (draft and extension scenarios left out).
 * - launchSharedBrowser(): Chromium started once with playwright-core's `launchServer`; the
 *   fixture of each scenario connects to its WebSocket endpoint.
 * - runClientScenario(name): the CLI's verdict for one scenario (exit code 0 = OVERALL:
 *   PASSED: no failed or warning check, the client exited 0 unless the scenario allows an
 *   error, no timeout) with its checks from the `-o` directory. The CLI runs once per scenario
 *   as before, in a Node 22 process that keeps it loaded (keptLoaded, one per CLI version,
 *   ended by startSharedParts' `stop`): a process of its own per scenario cost about 1 s of CPU
 *   to start, 60 starts in the two client files (issue 43).
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserServer } from 'playwright-core';
import { chromiumLaunchOptions, ensureChromium } from './browser.js';
import { startOAuthServer } from './oauth.js';
import { startRedis } from './redis.js';
import { CONFORMANCE_2026_CLI, CONFORMANCE_CLI, keptLoaded, PROJECT_ROOT, stopConformanceCli, type ConformanceCheck } from './conformance.js';
import { startFixtureHost } from './conformance-fixture-host.js';

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

/**
 * The 18 client scenarios new at 2026-07-28 in @modelcontextprotocol/conformance 0.2.0-alpha.11
 * (`conformance list --client --requirements 2026-07-28`: the 17 required and not in 0.1.16,
 * and `json-schema-2020-12-preservation`, added after the release), run with `--explore`.
 */
export const CLIENT_SCENARIOS_2026: readonly string[] = [
  'request-metadata',
  'auth/resource-mismatch',
  'auth/offline-access-scope',
  'auth/offline-access-not-supported',
  'auth/authorization-server-migration',
  'auth/iss-supported',
  'auth/iss-not-advertised',
  'auth/iss-supported-missing',
  'auth/iss-wrong-issuer',
  'auth/iss-unexpected',
  'auth/iss-normalized',
  'auth/metadata-issuer-mismatch',
  'sep-2322-client-request-state',
  'http-standard-headers',
  'http-custom-headers',
  'http-invalid-tool-headers',
  'json-schema-ref-no-deref',
  'json-schema-2020-12-preservation',
];

/**
 * The DPoP extension's client scenarios (`io.modelcontextprotocol/auth/dpop`, SEP-1932; issue 42
 * cause 12): a DPoP-bound token asked for with a proof at the token endpoint and presented
 * with the DPoP scheme and a fresh proof on every request, and (`-nonce`) the authorization
 * server's and the MCP server's `use_dpop_nonce` answered by one retry with their nonce.
 */
export const CLIENT_SCENARIOS_DPOP: readonly string[] = ['auth/dpop', 'auth/dpop-nonce'];

/** The command the suite starts per scenario: it hands the scenario to this process's fixture host (startSharedParts). */
const SHIM = path.join(PROJECT_ROOT, 'test', 'fixtures', 'conformance-client-shim.mjs');

/**
 * What every scenario's fixture shares (issue 43: the suite's time): one Redis, the gateway's
 * own MCP authorization server and one Chromium, handed to the fixture through the environment
 * the conformance CLI passes on. `stop` ends them.
 */
export async function startSharedParts(): Promise<{ stop: () => Promise<void> }> {
  const [redis, idp, browser] = await Promise.all([startRedis(), startOAuthServer(), launchSharedBrowser()]);
  process.env.CONFORMANCE_REDIS_URL = redis.url;
  process.env.CONFORMANCE_IDP_ISSUER = idp.issuer;
  process.env.CONFORMANCE_BROWSER_WS = browser.wsEndpoint();
  const host = await startFixtureHost({ redisUrl: redis.url, issuer: idp.issuer, browserWs: browser.wsEndpoint(), ...(process.env.CONFORMANCE_GATEWAY_LOG ? { gatewayLog: process.env.CONFORMANCE_GATEWAY_LOG } : {}) });
  process.env.CONFORMANCE_FIXTURE_HOST = host.url;
  return {
    stop: async () => {
      await stopConformanceCli();
      await host.stop();
      await browser.close();
      await Promise.allSettled([idp.stop(), redis.stop()]);
    },
  };
}

/**
 * The browser the scenarios' fixtures connect to: the run's shared one when `npm test` started
 * it (SB_TEST_BROWSER_WS, test/helpers/browser.ts), left running at `close()`; else launched
 * here, for this file.
 */
export async function launchSharedBrowser(): Promise<Pick<BrowserServer, 'wsEndpoint' | 'close'>> {
  const shared = process.env.SB_TEST_BROWSER_WS;
  if (shared) return { wsEndpoint: () => shared, close: async () => {} };
  ensureChromium();
  return chromium.launchServer(chromiumLaunchOptions(30_000));
}

export interface ClientScenarioResult {
  passed: boolean;
  checks: ConformanceCheck[];
  /** The CLI's output (its summary and the client's stderr when it failed), for diagnostics. */
  output: string;
}

export interface ClientScenarioOptions {
  timeoutMs?: number;
  /** The 0.2.0-alpha suite (`conformance-2026`) and the fixture's `--explore` journey; else 0.1.16's. */
  suite2026?: boolean;
  /** The user's SDK client: the 2025-11-25 one (default) or the 2026-07-28 one. */
  user?: '2025-11-25' | '2026-07-28';
}

/**
 * Runs one scenario. The fixture reads CONFORMANCE_REDIS_URL, CONFORMANCE_IDP_ISSUER and
 * CONFORMANCE_BROWSER_WS from the environment the CLI passes on (process.env here).
 */
export async function runClientScenario(scenario: string, options: ClientScenarioOptions = {}): Promise<ClientScenarioResult> {
  const timeoutMs = options.timeoutMs ?? 90_000;
  const outDir = await mkdtemp(path.join(tmpdir(), 'sb-conformance-client-'));
  try {
    const flags = [...(options.suite2026 ? ['--explore'] : []), ...(options.user === '2026-07-28' ? ['--user=2026-07-28'] : [])];
    const command = [process.execPath, SHIM, ...flags].join(' ');
    const run = await keptLoaded(options.suite2026 ? CONFORMANCE_2026_CLI : CONFORMANCE_CLI).run(['client', '--scenario', scenario, '--command', command, '--timeout', String(timeoutMs), '-o', outDir], timeoutMs + 60_000);
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
