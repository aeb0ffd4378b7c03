/**
 * The official conformance suite's CLIENT scenarios through the gateway (issue 33, "Done
 * when"): for each scenario the suite starts its servers (an MCP server and, for `auth/*`,
 * its authorization server) and runs the client command, whose journey
 * (test/fixtures/conformance-journey.ts, run in this process) puts a real gateway between the
 * official SDK client and those servers and links the account in Chromium when a call answers
 * -32042. The suite's own checks judge the gateway: as an MCP
 * client of the backend, and as the OAuth client of the backend's authorization server
 * (discovery order, registration, Client ID Metadata Documents, auth methods, scopes,
 * 2025-03-26 fallbacks).
 *
 * Real parts: one Redis, the gateway's own MCP authorization server (oauth2-mock-server)
 * and one Chromium shared by all scenarios; one gateway per scenario. Each test names its
 * scenario; the scenarios that wait for work outside this branch are `todo` with the issue
 * item that makes them pass. CONFORMANCE_CLIENT_SCENARIOS=a,b runs only those.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CLIENT_SCENARIOS, runClientScenario, startSharedParts } from '../helpers/conformance-client.js';

/** Scenarios that cannot pass before another part of issue 33 lands (then remove them here). */
const WAITING: Readonly<Record<string, string>> = {};

const only = process.env.CONFORMANCE_CLIENT_SCENARIOS?.split(',').filter((s) => s !== '');
const scenarios = only?.length ? CLIENT_SCENARIOS.filter((s) => only.includes(s)) : CLIENT_SCENARIOS;

let shared: { stop: () => Promise<void> } | undefined;
const passed: string[] = [];

before(async () => {
  shared = await startSharedParts();
});

after(async () => {
  process.stderr.write(`# client scenarios through the gateway: ${passed.length} of ${scenarios.length} passed (${passed.join(', ')})\n`);
  await shared?.stop();
});

for (const scenario of scenarios) {
  const waiting = WAITING[scenario];
  test(scenario, { timeout: 240_000, ...(waiting ? { todo: `waits for ${waiting}` } : {}) }, async (t) => {
    const result = await runClientScenario(scenario);
    if (result.passed) passed.push(scenario);
    const failed = result.checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
    for (const c of failed) t.diagnostic(`${c.status} ${c.id}: ${c.errorMessage ?? ''}`);
    assert.ok(result.passed, `${scenario} failed through the gateway:\n${failed.map((c) => `  ${c.status} ${c.id}: ${c.errorMessage ?? ''}`).join('\n')}\n--- CLI output (tail) ---\n${result.output.slice(-3000)}`);
  });
}
