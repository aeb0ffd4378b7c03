/**
 * The setup the end-to-end tests of `confirm` rules share (issue 46), real parts only: Redis
 * shared by two gateway replicas, the real OAuth server (MCP tokens and the browser sign-in),
 * the bank backend (test/fixtures/bank-backend.ts, which records every call reaching it) and
 * Chromium; with helpers for a held call's -32042, a signed-in browser at a link, and a
 * decision taken on the approval page.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import type { Page } from 'playwright-core';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { startBankBackend, type BankBackend } from '../fixtures/bank-backend.js';
import { launchBrowser, type BrowserHandle } from './browser.js';
import { startGateway, type GatewayHandle } from './gateway.js';
import { startOAuthServer, type OAuthHandle } from './oauth.js';
import { startRedis, type RedisHandle } from './redis.js';

export const CONFIRM_AUDIENCE = 'https://switchboard.test/mcp';

export interface ConfirmRig {
  redis: RedisHandle;
  idp: OAuthHandle;
  /** The first bank backend (`bank`, 2025-11-25 only, unless `banks` says otherwise). */
  bank: BankBackend;
  /** Every bank backend by its name. */
  banks: Record<string, BankBackend>;
  browser: BrowserHandle;
  replicaA: GatewayHandle;
  replicaB: GatewayHandle;
  /** Every log line of both replicas, each prefixed with its replica's letter. */
  logLines: string[];
  /** SDK clients to close at the end. */
  clients: Client[];
  close(): Promise<void>;
}

export interface ConfirmRigOptions {
  /** Redis key prefix and the start of the secrets: one per test file. */
  name: string;
  /** `policy.rules`. */
  rules: NonNullable<ConfigInput['policy']>['rules'];
  /** More top-level config (audit, approvals, servers, discovery) of the replica `A` or `B`. */
  overrides?: (replica: 'A' | 'B') => Partial<ConfigInput>;
  /** The bank backends and the era each speaks (test/fixtures/bank-backend.ts); default one `bank`, 2025-11-25 only. */
  banks?: Array<{ name: string; kind: 'legacy' | 'modern' }>;
}

export async function startConfirmRig(options: ConfirmRigOptions): Promise<ConfirmRig> {
  const kinds = options.banks ?? [{ name: 'bank', kind: 'legacy' }];
  const [redis, idp, browser, ...started] = await Promise.all([startRedis(), startOAuthServer(), launchBrowser(), ...kinds.map((b) => startBankBackend(b.kind))]);
  const banks = Object.fromEntries(kinds.map((b, i) => [b.name, started[i]!]));
  const bank = started[0]!;
  const logLines: string[] = [];
  const key = (what: string) => `${options.name}-${what}-key-0123456789abcdef0123456789abcdef`;
  const gatewayOn = (letter: 'A' | 'B') =>
    startGateway({
      issuer: idp.issuer,
      backends: kinds.map((b) => ({ name: b.name, url: banks[b.name]!.url, protocol: b.kind === 'legacy' ? '2025-11-25' : '2026-07-28' })),
      overrides: {
        redis: { url: redis.url, keyPrefix: `${options.name}:` },
        secrets: { cookieKey: key('cookie'), tokenKey: key('token') },
        auth: { issuer: idp.issuer, audience: CONFIRM_AUDIENCE, algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
        policy: { rules: options.rules },
        log: { level: 'debug' },
        ...options.overrides?.(letter),
      },
      logStream: new Writable({
        write(chunk: Buffer, _encoding, done) {
          logLines.push(`${letter} ${chunk.toString()}`);
          done();
        },
      }),
    });
  const gateways = await Promise.allSettled([gatewayOn('A'), gatewayOn('B')]);
  if (gateways.some((g) => g.status === 'rejected')) {
    // A config the gateway refuses: what was started is stopped, so the test's process can end.
    await Promise.allSettled(gateways.map((g) => (g.status === 'fulfilled' ? g.value.close() : undefined)));
    await browser.close();
    await Promise.allSettled([...started.map((b) => b.close()), idp.stop(), redis.stop()]);
    throw (gateways.find((g) => g.status === 'rejected') as PromiseRejectedResult).reason;
  }
  const [replicaA, replicaB] = gateways.map((g) => (g as PromiseFulfilledResult<GatewayHandle>).value) as [GatewayHandle, GatewayHandle];
  const clients: Client[] = [];
  return {
    redis,
    idp,
    bank,
    banks,
    browser,
    replicaA,
    replicaB,
    logLines,
    clients,
    async close() {
      await Promise.allSettled(clients.map((c) => c.close()));
      await browser.close();
      await Promise.allSettled([replicaA.close(), replicaB.close()]);
      await Promise.allSettled([...started.map((b) => b.close()), idp.stop(), redis.stop()]);
    },
  };
}

export type UrlElicitation = { mode: string; elicitationId: string; url: string; message: string };

/** The call's -32042 and its one URL elicitation. */
export async function heldCall(client: Client, name: string, args: Record<string, unknown>): Promise<UrlElicitation> {
  const refused = await client.callTool({ name, arguments: args }).then(
    (result) => new Error(`expected -32042, got ${JSON.stringify(result)}`),
    (err: unknown) => err,
  );
  assert.ok(refused instanceof McpError, String(refused));
  assert.equal(refused.code, -32042, refused.message);
  const [elicitation, ...more] = (refused.data as { elicitations: UrlElicitation[] }).elicitations;
  assert.equal(more.length, 0);
  assert.equal(elicitation!.mode, 'url');
  return elicitation!;
}

/** A signed-in browser of `sub` at the link; `claims` go into its ID token (name, email, groups…). */
export async function openedAs(rig: ConfirmRig, link: string, sub: string, claims?: Record<string, unknown>): Promise<{ page: Page; status: number | undefined; text: string }> {
  const context = await rig.browser.newContext();
  await context.addCookies([rig.idp.subjectCookie(sub), ...(claims ? [rig.idp.claimsCookie(claims)] : [])]);
  const page = await context.newPage();
  const landing = await page.goto(link);
  return { page, status: landing?.status(), text: (await page.textContent('body')) ?? '' };
}

/** Clicks Approve or Deny on the approval page; the outcome page's text. */
export async function decideOn(page: Page, action: 'approve' | 'deny'): Promise<string> {
  await Promise.all([page.waitForURL(/\/approve$/), page.click(`button[value="${action}"]`)]);
  return (await page.textContent('body')) ?? '';
}
