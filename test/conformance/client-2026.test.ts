/**
 * The conformance suite's CLIENT scenarios new at 2026-07-28 (@modelcontextprotocol/conformance
 * 0.2.0-alpha.11) through the gateway (issue 42, "Tests"): as in client-auth.test.ts, the suite
 * starts each scenario's servers and runs test/fixtures/conformance-client.ts, which puts a real
 * gateway between a user's SDK client and them, and walks each link in Chromium; what the
 * suite judges is the gateway as the client of a 2026-07-28 server. Every scenario runs twice:
 * with a 2025-11-25 user (the SDK v1 client, bridged by the gateway) and with a 2026-07-28 user
 * (`@modelcontextprotocol/client` 2.x, pinned to 2026-07-28). The user's journey is the
 * fixture's `--explore` one: every tool called (the scenario's `toolCalls` arguments), every
 * resource read, every prompt got. The DPoP extension's two scenarios (`auth/dpop`,
 * `auth/dpop-nonce`) run beside them, for both users too.
 *
 * Real parts shared by all runs (issue 43: the suite's time): one Redis, the gateway's own
 * MCP authorization server and one Chromium; one gateway per run. A run that still fails is
 * `todo`, naming the cause of issue 42 that makes it pass. CONFORMANCE_CLIENT_SCENARIOS=a,b
 * runs only those; CONFORMANCE_CLIENT_USERS=2026-07-28 only that user.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CLIENT_SCENARIOS_2026, CLIENT_SCENARIOS_DPOP, runClientScenario, startSharedParts } from '../helpers/conformance-client.js';

type User = '2025-11-25' | '2026-07-28';

/** Runs that fail until a cause of issue 42 is fixed, by `<scenario> <user>` (remove the entry when it passes). */
const WAITING: Readonly<Record<string, string>> = {
};

const only = process.env.CONFORMANCE_CLIENT_SCENARIOS?.split(',').filter((s) => s !== '');
/** The 18 of 2026-07-28 and the DPoP extension's two (issue 42 cause 12). */
const ALL = [...CLIENT_SCENARIOS_2026, ...CLIENT_SCENARIOS_DPOP];
const scenarios = only?.length ? ALL.filter((s) => only.includes(s)) : ALL;
const users = (process.env.CONFORMANCE_CLIENT_USERS?.split(',') ?? ['2025-11-25', '2026-07-28']).filter((u): u is User => u === '2025-11-25' || u === '2026-07-28');

let shared: { stop: () => Promise<void> } | undefined;
const passed = new Map<User, string[]>(users.map((u) => [u, []]));

before(async () => {
  shared = await startSharedParts();
});

after(async () => {
  for (const [user, names] of passed) {
    process.stderr.write(`# 2026-07-28 (and DPoP) client scenarios through the gateway, ${user} user: ${names.length} of ${scenarios.length} passed (${names.join(', ')})\n`);
  }
  await shared?.stop();
});

for (const scenario of scenarios) {
  for (const user of users) {
    const waiting = WAITING[`${scenario} ${user}`];
    test(`${scenario} (${user} user)`, { timeout: 240_000, ...(waiting ? { todo: `waits for ${waiting}` } : {}) }, async (t) => {
      const result = await runClientScenario(scenario, { suite2026: true, user });
      if (result.passed) passed.get(user)!.push(scenario);
      const failed = result.checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
      for (const c of failed) t.diagnostic(`${c.status} ${c.id}: ${c.errorMessage ?? ''}`);
      assert.ok(result.passed, `${scenario} failed through the gateway (${user} user):\n${failed.map((c) => `  ${c.status} ${c.id}: ${c.errorMessage ?? ''}`).join('\n')}\n--- CLI output (tail) ---\n${result.output.slice(-3000)}`);
    });
  }
}
