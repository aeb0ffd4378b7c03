/**
 * Backends with `upstreamAuth` reload without a restart (issue 32 §1, docs/operations-reload.md),
 * end to end with real parts: two gateway replicas on one real Redis, each reading its own
 * ConfigMap-style mount changed by the kubelet's `..data` swap, two real OAuth servers (the
 * MCP authorization server and the third-party provider), the strict protected backend, the
 * official SDK client (requests alternating between the replicas) and Chromium.
 *
 * Added by a swap: a call gets -32042, the link's consent page is served by both replicas,
 * and the full link works. Changed (scopes): the next link asks the provider for the new
 * scopes. Removed: neither replica's `/connections` offers the provider, and a pending link
 * for it is refused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { eventually, linkRequired, type UrlElicitation } from '../helpers/linking-journey.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReloadingReplicas, type ReloadingReplicas } from '../helpers/reload-replicas.js';

const TEST_TIMEOUT_MS = 120_000;
let redis: RedisHandle;
let idp: OAuthHandle;
let provider: OAuthHandle;
let backend: ProtectedBackend;
let plain: FixtureChild;
let browser: BrowserHandle;
let mounted: ReloadingReplicas;

before(async () => {
  [redis, idp, provider, browser, plain] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer(), launchBrowser(), startFixtureChild('announcing-backend.ts')]);
  backend = await startProtectedBackend(provider.issuer);
  mounted = await startReloadingReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [{ name: 'plain', url: plain.url }],
    auth: { login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    extra: { secrets: { cookieKey: 'upauth-cookie-key-0123456789abcdef0123456789', tokenKey: 'upauth-token-key-0123456789abcdef012345678' } },
  });
});

after(async () => {
  await browser?.close();
  await mounted?.stop();
  await Promise.allSettled([backend?.stop(), plain?.child.stop(), provider?.stop(), idp?.stop(), redis?.stop()]);
});

const replicaUrl = (index: number) => mounted.set.replicas[index]!.url;
const upstreamAuth = (scopes: string[]) => ({ provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes });
const withProtected = (scopes: string[]) => ({ backends: [{ name: 'plain', url: plain.url }, { name: 'protected', url: backend.url, upstreamAuth: upstreamAuth(scopes) }] });

interface Linker {
  client: Client;
  completed: string[];
}

/** An SDK client of `/mcp/protected` declaring URL-mode elicitation, its requests alternating between the replicas. */
async function connect(sub: string): Promise<Linker> {
  const token = await idp.token({ sub, aud: mounted.set.audience });
  const client = new Client({ name: 'upauth-reload', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  const linker: Linker = { client, completed: [] };
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void linker.completed.push(n.params.elicitationId));
  await client.connect(new StreamableHTTPClientTransport(mounted.set.endpoint(0, 'protected'), { fetch: mounted.set.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return linker;
}

/** `link` on replica `index` (the link names the public URL, which is replica 0). */
const on = (index: number, link: string) => {
  const url = new URL(link);
  return `${replicaUrl(index)}${url.pathname}${url.search}`;
};

/** A browser signed in (on first use) as `sub` at the gateway and `sub`-at-acme at the provider; records every request to the provider. */
async function browserFor(sub: string): Promise<{ context: BrowserContext; providerRequests: URL[] }> {
  const context = await browser.newContext();
  await context.addCookies([idp.subjectCookie(sub), provider.subjectCookie(`${sub}-at-acme`)]);
  const providerRequests: URL[] = [];
  context.on('request', (request) => {
    if (request.url().startsWith(provider.issuer)) providerRequests.push(new URL(request.url()));
  });
  return { context, providerRequests };
}

/** Opens `url` (signing in first when needed, which may come back on replica 0) and returns the status and text of the page at `url`. */
async function pageText(context: BrowserContext, url: string): Promise<{ status: number | undefined; text: string }> {
  const page = await context.newPage();
  try {
    await page.goto(url);
    const response = await page.goto(url);
    return { status: response?.status(), text: (await page.textContent('body')) ?? '' };
  } finally {
    await page.close();
  }
}

/** The consent page of `link` on replica 0, Continue, the provider, back at the callback. */
async function continueLink(context: BrowserContext, link: string): Promise<void> {
  const page = await context.newPage();
  try {
    assert.equal((await page.goto(on(0, link)))?.status(), 200);
    await Promise.all([page.waitForURL(/\/oauth\/callback\/acme\?/, { timeout: 15_000 }), page.click('button[value="continue"]')]);
    assert.match((await page.textContent('body')) ?? '', /return to your client/i);
  } finally {
    await page.close();
  }
}

async function whoami(client: Client): Promise<string> {
  return JSON.stringify(((await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult).content);
}

describe('a backend with upstreamAuth added, changed and removed by a ConfigMap swap on two replicas', () => {
  let pending: UrlElicitation;
  let carolBrowser: BrowserContext;

  test('added: a call gets -32042, both replicas serve the link, the full link works', { timeout: TEST_TIMEOUT_MS }, async () => {
    await mounted.swapAll(withProtected(['repo']));
    await mounted.allCount('applied', 1);
    const alice = await connect('alice');
    const { context } = await browserFor('alice');
    try {
      const link = await linkRequired(alice.client, 'connect');
      for (const index of [1, 0]) {
        const consent = await pageText(context, on(index, link.url));
        assert.equal(consent.status, 200, `replica ${index}: ${consent.text}`);
        assert.match(consent.text, /acme/);
        assert.match(consent.text, /repo/);
      }
      await continueLink(context, link.url);
      await eventually('notifications/elicitation/complete', () => alice.completed.includes(link.elicitationId));
      assert.match(await whoami(alice.client), /third-party user: alice-at-acme/);
      assert.match(await whoami(alice.client), /alice-at-acme/);
      for (const index of [0, 1]) assert.match((await pageText(context, `${replicaUrl(index)}/connections`)).text, /acme[\s\S]*Connected/);
    } finally {
      await context.close();
      await alice.client.close();
    }
  });

  test('changed: the next link asks the provider for the new scopes, on both replicas', { timeout: TEST_TIMEOUT_MS }, async () => {
    await mounted.swapAll(withProtected(['repo', 'admin']));
    await mounted.allCount('applied', 2);
    const bob = await connect('bob');
    const { context, providerRequests } = await browserFor('bob');
    try {
      const link = await linkRequired(bob.client, 'connect');
      for (const index of [1, 0]) assert.match((await pageText(context, on(index, link.url))).text, /admin/, `replica ${index} shows the new scopes`);
      await continueLink(context, link.url);
      const authorize = providerRequests.find((u) => u.searchParams.has('code_challenge'));
      assert.ok(authorize, `a request to the provider's authorization endpoint among ${providerRequests.map(String).join(', ')}`);
      assert.equal(authorize.searchParams.get('scope'), 'repo admin');
      await eventually('notifications/elicitation/complete', () => bob.completed.includes(link.elicitationId));
      assert.match(await whoami(bob.client), /third-party user: bob-at-acme/);
    } finally {
      await context.close();
      await bob.client.close();
    }
  });

  test('removed: neither replica offers the provider on /connections, and a pending link for it is refused', { timeout: TEST_TIMEOUT_MS }, async () => {
    const carol = await connect('carol');
    carolBrowser = (await browserFor('carol')).context;
    try {
      pending = await linkRequired(carol.client, 'connect');
      assert.match((await pageText(carolBrowser, `${replicaUrl(1)}/connections`)).text, /acme/);
    } finally {
      await carol.client.close().catch(() => undefined);
    }
    await mounted.swapAll({ backends: [{ name: 'plain', url: plain.url }] });
    await mounted.allCount('applied', 3);
    try {
      for (const index of [0, 1]) {
        const connections = await pageText(carolBrowser, `${replicaUrl(index)}/connections`);
        assert.equal(connections.status, 200);
        assert.doesNotMatch(connections.text, /acme/, `replica ${index}`);
        assert.match(connections.text, /No accounts are configured/);
        const link = await pageText(carolBrowser, on(index, pending.url));
        assert.equal(link.status, 404, `replica ${index}: ${link.text}`);
      }
    } finally {
      await carolBrowser.close();
    }
  });
});
