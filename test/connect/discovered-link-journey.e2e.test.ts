/**
 * Linking an account at a backend whose authorization server is found by discovery and
 * makes every registered client confidential (issue 33 §1, §2, §4), end to end with real
 * parts: the gateway on a real Redis, the MCP authorization server for the gateway's own
 * clients (oauth2-mock-server), test/fixtures/secret-post-server.ts as the backend and its
 * authorization server (a client secret on registration, `client_secret_post` only), the
 * official SDK client and Chromium.
 *
 * Connecting needs no account, even when the backend's authorization server cannot be
 * found: discovery is the link's business, not `initialize`'s.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { withDeadline } from '../helpers/deadline.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { sendJson, startHttpFixture, type HttpFixture } from '../fixtures/provider-http-fixture.js';
import { startSecretPostServer, type SecretPostServer } from '../fixtures/secret-post-server.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let browser: BrowserHandle;
let files: SecretPostServer;
let broken: HttpFixture;
let gateway: GatewayHandle;

before(async () => {
  [redis, idp, browser, files] = await Promise.all([startRedis(), startOAuthServer(), launchBrowser(), startSecretPostServer()]);
  // A backend that wants a token but names an authorization server nobody runs.
  const nobody = await freePort();
  broken = await startHttpFixture((req, res) => {
    if (req.path === '/mcp') return sendJson(res, 401, { error: 'invalid_token' }, { 'www-authenticate': `Bearer resource_metadata="${broken.origin}/prm"` });
    if (req.path === '/prm') return sendJson(res, 200, { resource: `${broken.origin}/mcp`, authorization_servers: [`http://127.0.0.1:${nobody}`] });
  });
  const port = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    redisUrl: redis.url,
    backends: [
      { name: 'files', url: files.mcpUrl, upstreamAuth: { provider: 'files', discover: true } },
      { name: 'broken', url: `${broken.origin}/mcp`, upstreamAuth: { provider: 'broken', discover: true } },
    ],
    overrides: {
      secrets: { cookieKey: 'discovered-cookie-key-0123456789abcdef0123456', tokenKey: 'discovered-token-key-0123456789abcdef01234567' },
      auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  await Promise.allSettled([files?.close(), broken?.close(), idp?.stop(), redis?.stop()]);
});

async function connect(backend: string, sub: string): Promise<{ client: Client; completed: string[] }> {
  const token = await idp.token({ sub, aud: gateway.audience });
  const client = new Client({ name: 'discovered-journey', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  const completed: string[] = [];
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completed.push(n.params.elicitationId));
  await client.connect(new StreamableHTTPClientTransport(gateway.endpoint(backend), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return { client, completed };
}

test('connecting needs no account: initialize succeeds although the backend\'s authorization server cannot be found', { timeout: 60_000 }, async () => {
  const { client } = await connect('broken', 'dora');
  try {
    assert.equal(client.getServerVersion()?.name, 'broken');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['connect']);
  } finally {
    await client.close();
  }
});

test('a link at an authorization server that issues a secret on registration and takes it only in the body', { timeout: 120_000 }, async () => {
  const { client, completed } = await connect('files', 'alice');
  try {
    const refused = await client.callTool({ name: 'whoami', arguments: {} }).then(() => undefined, (err: unknown) => err);
    assert.ok(refused instanceof McpError && refused.code === -32042, `expected -32042, got ${String(refused)}`);
    const [link] = (refused.data as { elicitations: Array<{ elicitationId: string; url: string }> }).elicitations;

    const context = await browser.newContext();
    try {
      await context.addCookies([idp.subjectCookie('alice')]);
      const page = await context.newPage();
      assert.equal((await page.goto(link!.url))?.status(), 200);
      await Promise.all([page.waitForURL(/\/oauth\/callback\/files\?/), page.click('button[value="continue"]')]);
      assert.match((await page.textContent('body')) ?? '', /return to your client/i);
    } finally {
      await context.close();
    }
    await withDeadline((async () => {
      while (!completed.includes(link!.elicitationId)) await new Promise((resolve) => setTimeout(resolve, 100));
    })(), 15_000, 'notifications/elicitation/complete');

    const result = (await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;
    assert.match(JSON.stringify(result.content), /token issued to client-1/);
    assert.equal(files.clients.size, 1, 'registered once');
    assert.deepEqual(files.tokenRequests, [{ basic: false, bodySecret: true, accepted: true }], 'client_secret_post, as assigned');
    assert.deepEqual(files.authorizationScopes, ['files:read'], 'the scope of the backend\'s challenge');
  } finally {
    await client.close();
  }
});
