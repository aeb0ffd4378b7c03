/**
 * URL-mode elicitation end to end (issue 3, SPEC §4), with real parts only: a real Redis,
 * two real OAuth server processes (the MCP authorization server and a third-party
 * provider), a backend that accepts only the provider's tokens, the official SDK client and
 * Chromium. The client gets -32042; a different signed-in user is refused at the link; the
 * right user links the account; the client receives notifications/elicitation/complete; the
 * retry succeeds with the third-party identity; Redis holds no plaintext token; the link
 * cannot be used again; the client's own token never reaches the backend.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const AUDIENCE = 'https://switchboard.test/mcp';
const PREFIX = 'e2e:';
let redis: RedisHandle;
let idp: OAuthHandle;
let provider: OAuthHandle;
let backend: ProtectedBackend;
let gateway: GatewayHandle;
let browser: BrowserHandle;
/** Every line the gateway logged, at trace level, to prove no token is ever in a log. */
const logLines: string[] = [];

before(async () => {
  [redis, idp, provider, browser] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer(), launchBrowser()]);
  backend = await startProtectedBackend(provider.issuer);
  gateway = await startGateway({
    issuer: idp.issuer,
    backends: [
      {
        name: 'protected',
        url: backend.url,
        upstreamAuth: { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['repo'] },
      },
    ],
    overrides: {
      redis: { url: redis.url, keyPrefix: PREFIX },
      secrets: { cookieKey: 'e2e-cookie-key-0123456789abcdef0123456789', tokenKey: 'e2e-token-key-0123456789abcdef01234567890' },
      auth: { issuer: idp.issuer, audience: AUDIENCE, algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
      log: { level: 'trace' },
    },
    logStream: new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString());
        done();
      },
    }),
  });
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  await Promise.allSettled([backend?.stop(), provider?.stop(), idp?.stop(), redis?.stop()]);
});

async function eventually(what: string, check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function redisValues(): Promise<string[]> {
  const client = new Redis(redis.url);
  try {
    const keys = await client.keys(`${PREFIX}*`);
    const values: string[] = [];
    for (const key of keys) {
      const type = await client.type(key);
      if (type === 'string') values.push((await client.get(key)) ?? '');
      if (type === 'list') values.push(...(await client.lrange(key, 0, -1)));
    }
    return values;
  } finally {
    client.disconnect();
  }
}

test('link a third-party account through the browser, then the retried call succeeds', async () => {
  const mcpToken = await idp.token({ sub: 'alice', aud: AUDIENCE });
  const completed: string[] = [];
  const client = new Client({ name: 'url-mode-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
    completed.push(n.params.elicitationId);
  });
  const transport = new StreamableHTTPClientTransport(gateway.endpoint('protected'), { requestInit: { headers: { Authorization: `Bearer ${mcpToken}` } } });
  await client.connect(transport);
  try {
    // 1. No linked account: -32042 with a URL that carries nothing but the opaque id.
    const refused = await client.callTool({ name: 'whoami', arguments: {} }).then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(refused instanceof McpError, `expected an McpError, got ${String(refused)}`);
    assert.equal(refused.code, -32042);
    const [elicitation] = (refused.data as { elicitations: Array<{ mode: string; elicitationId: string; url: string; message: string }> }).elicitations;
    assert.equal(elicitation!.mode, 'url');
    const link = new URL(elicitation!.url);
    assert.equal(link.origin + link.pathname, `${gateway.url}/connect`);
    assert.deepEqual([...link.searchParams.keys()], ['elicitationId']);
    assert.equal(link.searchParams.get('elicitationId'), elicitation!.elicitationId);

    // 2. Another signed-in user opening the link is refused, and nothing changes.
    const bob = await browser.newContext();
    await bob.addCookies([idp.subjectCookie('bob')]);
    const bobPage = await bob.newPage();
    const bobLanding = await bobPage.goto(link.href);
    assert.equal(bobLanding?.status(), 403);
    assert.match(await bobPage.textContent('body') ?? '', /not for your account/i);

    // 3. The right user signs in, sees who asks for what, and continues to the provider.
    const alice = await browser.newContext();
    await alice.addCookies([idp.subjectCookie('alice'), provider.subjectCookie('alice-at-acme')]);
    const page = await alice.newPage();
    const consent = await page.goto(link.href);
    assert.equal(consent?.status(), 200);
    const consentText = (await page.textContent('body')) ?? '';
    assert.match(consentText, /protected/);
    assert.match(consentText, /acme/);
    assert.match(consentText, /repo/);
    await Promise.all([
      page.waitForURL(/\/oauth\/callback\/acme\?/, { timeout: 15_000 }).catch(async (err: Error) => {
        throw new Error(`${err.message}\npage at ${page.url()} says: ${(await page.textContent('body'))?.trim()}`);
      }),
      page.click('button[value="continue"]'),
    ]);
    assert.match((await page.textContent('body')) ?? '', /return to your client/i);

    // 4. The MCP session that asked hears that the elicitation completed.
    await eventually('notifications/elicitation/complete', () => completed.includes(elicitation!.elicitationId), 10_000);

    // 5. The retry reaches the backend with the third-party identity.
    const retried = await client.callTool({ name: 'whoami', arguments: {} });
    assert.match(JSON.stringify(retried.content), /third-party user: alice-at-acme/);

    // 6. No plaintext token in Redis; the client's own token never reached the backend.
    const seen = await backend.seenAuthorizations();
    const thirdPartyTokens = seen.map((h) => h.replace(/^Bearer /, ''));
    assert.ok(thirdPartyTokens.length > 0, 'the backend saw the third-party token');
    assert.ok(!thirdPartyTokens.includes(mcpToken), 'the client token never reached the backend');
    const values = await redisValues();
    assert.ok(values.length > 0);
    for (const token of thirdPartyTokens) {
      assert.ok(!values.some((v) => v.includes(token) || v.includes(token.split('.')[2]!)), 'no third-party token in Redis in the clear');
    }

    // No token of either kind in any log line.
    const logs = logLines.join('');
    assert.ok(logs.length > 0, 'the gateway logged');
    assert.ok(!logs.includes(mcpToken), 'the client token is not logged');
    for (const token of thirdPartyTokens) assert.ok(!logs.includes(token), 'no third-party token is logged');

    // 7. The link is single use.
    const reused = await page.goto(link.href);
    assert.equal(reused?.status(), 410);
    await bob.close();
    await alice.close();
  } finally {
    await client.close();
  }
});
