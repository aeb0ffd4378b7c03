/**
 * Step-up linking (issue 33 §3; MCP 2025-11-25 "Authorization", §Step-Up Authorization
 * Flow), end to end with real parts: the gateway on a real Redis, the MCP authorization
 * server of the gateway's own clients (oauth2-mock-server), test/fixtures/scoped-backend.ts as
 * the backend and its provider, the official SDK client and Chromium.
 *
 * Journey: a call before linking gets -32042; the user links (scope `read`); a call that
 * needs `write` is answered 403 `insufficient_scope` by the backend, and the client gets
 * -32042 with a new link whose authorization request asks for `read write`, while the token
 * it has keeps serving what it can; after the second link the retry succeeds. A 403 asking
 * only for scopes the token already has gets a JSON-RPC error naming them, not a link.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { eventually, linkInBrowser, linkRequired } from '../helpers/linking-journey.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startScopedBackend, type ScopedBackend } from '../fixtures/scoped-backend.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let browser: BrowserHandle;
let backend: ScopedBackend;
let gateway: GatewayHandle;

before(async () => {
  [redis, idp, browser, backend] = await Promise.all([startRedis(), startOAuthServer(), launchBrowser(), startScopedBackend()]);
  const port = await freePort();
  const upstreamAuth = { provider: 'acme', authorizationUrl: backend.authorizationUrl, tokenUrl: backend.tokenUrl, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['read'] };
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    redisUrl: redis.url,
    backends: [{ name: 'scoped', url: backend.mcpUrl, upstreamAuth }],
    overrides: {
      secrets: { cookieKey: 'step-up-cookie-key-0123456789abcdef0123456789', tokenKey: 'step-up-token-key-0123456789abcdef01234567890' },
      auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  await Promise.allSettled([backend?.close(), idp?.stop(), redis?.stop()]);
});

test('a 403 insufficient_scope leads to a step-up link asking for the union of scopes; the retry succeeds; a 403 for granted scopes is an error, not a link', { timeout: 120_000 }, async () => {
  const token = await idp.token({ sub: 'alice', aud: gateway.audience });
  const client = new Client({ name: 'step-up', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  const completed: string[] = [];
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completed.push(n.params.elicitationId));
  await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('scoped'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  try {
    // First link: the configured scope.
    const first = await linkRequired(client, 'write');
    await linkInBrowser(browser, first.url, 'acme', [idp.subjectCookie('alice')]);
    await eventually('the first link to complete', () => completed.includes(first.elicitationId));
    assert.deepEqual(backend.authorizeScopes(), ['read']);

    // The backend wants `write` too: a new link, for what the token has and what the backend wants.
    const second = await linkRequired(client, 'write');
    assert.notEqual(second.elicitationId, first.elicitationId);
    assert.match(second.message, /needs more access.*read write/);
    // The token the user has stays usable until the new link replaces it.
    const meanwhile = (await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;
    assert.match(JSON.stringify(meanwhile.content), /whoami with scope read"/);

    const consent = await linkInBrowser(browser, second.url, 'acme', [idp.subjectCookie('alice')]);
    assert.match(consent, /write/, 'the consent page names the wider scope');
    await eventually('the step-up link to complete', () => completed.includes(second.elicitationId));
    assert.deepEqual(backend.authorizeScopes(), ['read', 'read write'], 'the provider saw the wider scope requested');

    const retried = (await client.callTool({ name: 'write', arguments: {} })) as CallToolResult;
    assert.match(JSON.stringify(retried.content), /write with scope read write/);

    // 403 for a scope the token already has: no link can help, so an error that says what the backend wants.
    const refused = await client.callTool({ name: 'stubborn', arguments: {} }).then(
      (result) => result,
      (err: unknown) => err,
    );
    assert.ok(refused instanceof McpError, `expected a JSON-RPC error, got ${JSON.stringify(refused)}`);
    assert.equal(refused.code, -32010);
    assert.match(refused.message, /scope read.*already has/);
    assert.deepEqual((refused.data as Record<string, unknown>).requiredScopes, ['read']);
    assert.deepEqual((refused.data as Record<string, unknown>).grantedScopes, ['read', 'write']);
    assert.equal(backend.authorizeScopes().length, 2, 'no third authorization request');
    // And the token still works.
    assert.match(JSON.stringify(((await client.callTool({ name: 'write', arguments: {} })) as CallToolResult).content), /write with scope read write/);
  } finally {
    await client.close();
  }
});

test('/mcp: a member answering 403 insufficient_scope leads to the step-up link too, and the retry succeeds', { timeout: 120_000 }, async () => {
  const token = await idp.token({ sub: 'bob', aud: gateway.audience });
  const client = new Client({ name: 'step-up-aggregate', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  const completed: string[] = [];
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completed.push(n.params.elicitationId));
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', gateway.url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  try {
    const asked = backend.authorizeScopes().length;
    const first = await linkRequired(client, 'scoped__write');
    await linkInBrowser(browser, first.url, 'acme', [idp.subjectCookie('bob')]);
    await eventually('the first link to complete', () => completed.includes(first.elicitationId));
    const second = await linkRequired(client, 'scoped__write');
    assert.match(second.message, /needs more access.*read write/);
    await linkInBrowser(browser, second.url, 'acme', [idp.subjectCookie('bob')]);
    await eventually('the step-up link to complete', () => completed.includes(second.elicitationId));
    assert.deepEqual(backend.authorizeScopes().slice(asked), ['read', 'read write']);
    const retried = (await client.callTool({ name: 'scoped__write', arguments: {} })) as CallToolResult;
    assert.match(JSON.stringify(retried.content), /write with scope read write/);
    const refused = await client.callTool({ name: 'scoped__stubborn', arguments: {} }).then((r) => r, (err: unknown) => err);
    assert.ok(refused instanceof McpError && refused.code === -32010, `expected -32010, got ${JSON.stringify(refused)}`);
    assert.equal(backend.authorizeScopes().length, asked + 2);
  } finally {
    await client.close();
  }
});
