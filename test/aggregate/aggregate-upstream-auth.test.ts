/**
 * Linking a third-party account through the aggregated endpoint (SPEC §4 with §2 `/mcp`):
 * a backend with `upstreamAuth` sits in the aggregated session next to an open one. Its
 * tools are listed without a token (the backend lets anyone list), calling one asks for the
 * account with -32042, the user links it in a real Chromium, the aggregated session hears
 * `notifications/elicitation/complete`, and the retry reaches the backend with the
 * third-party token — never the client's own.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startPagingBackend, type PagingBackend } from '../fixtures/paging-backend.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { withDeadline } from '../helpers/deadline.js';
import { freePort } from '../helpers/free-port.js';
import { allToolNames } from '../helpers/pages.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';

let idp: OAuthHandle;
let provider: OAuthHandle;
let crm: ProtectedBackend;
let open: PagingBackend;
let browser: BrowserHandle;
let gateway: GatewayHandle;

before(async () => {
  [idp, provider, open, browser] = await Promise.all([startOAuthServer(), startOAuthServer(), startPagingBackend({ tools: 2, resources: 1, pageSize: 10, json: true }), launchBrowser()]);
  crm = await startProtectedBackend(provider.issuer, { openListing: true });
  const port = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    backends: [
      { name: 'open', url: open.url },
      {
        name: 'crm',
        url: crm.url,
        upstreamAuth: { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['repo'] },
      },
    ],
    overrides: {
      auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  await Promise.allSettled([crm?.stop(), open?.stop(), provider?.stop(), idp?.stop()]);
});

test('a tool of a backend with upstreamAuth asks for the account through /mcp, and works once it is linked', { timeout: 90_000 }, async () => {
  const mcpToken = await idp.token({ sub: 'erin', aud: gateway.audience });
  const completed: string[] = [];
  const client = new Client({ name: 'aggregate-link', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completed.push(n.params.elicitationId));
  await withDeadline(client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${mcpToken}` } } })), 15_000, 'connect');
  try {
    const names = (await allToolNames(client)).items;
    assert.ok(names.includes('crm__whoami'), `the protected backend's tools are listed: ${names.join(', ')}`);
    assert.ok(names.includes('open__t01'));

    const refused = await client.callTool({ name: 'crm__whoami', arguments: {} }).then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(refused instanceof McpError, `expected -32042, got ${String(refused)}`);
    assert.equal(refused.code, -32042);
    const [elicitation] = (refused.data as { elicitations: Array<{ elicitationId: string; url: string }> }).elicitations;
    assert.equal(elicitation!.url, `${gateway.url}/connect?elicitationId=${elicitation!.elicitationId}`);
    // The open backend (answering application/json) is not held up by the missing account.
    assert.deepEqual(((await client.callTool({ name: 'open__t02', arguments: { n: 1 } })) as CallToolResult).content, [{ type: 'text', text: 't02:{"n":1}' }]);
    const linked = (await client.callTool({ name: 'open__link', arguments: {} })) as CallToolResult;
    assert.equal((linked.content[0] as { uri: string }).uri, 'open+paging://item/2', 'JSON answers are rewritten too');

    const context = await browser.newContext();
    await context.addCookies([idp.subjectCookie('erin'), provider.subjectCookie('erin-at-acme')]);
    const page = await context.newPage();
    assert.equal((await page.goto(elicitation!.url))?.status(), 200);
    await Promise.all([page.waitForURL(/\/oauth\/callback(\/[a-z0-9-]+)?\?/), page.click('button[value="continue"]')]);
    assert.match((await page.textContent('body')) ?? '', /return to your client/i);
    await context.close();

    const deadline = Date.now() + 10_000;
    while (!completed.includes(elicitation!.elicitationId)) {
      assert.ok(Date.now() < deadline, 'notifications/elicitation/complete reached the aggregated session');
      await new Promise((r) => setTimeout(r, 100));
    }
    const retried = (await client.callTool({ name: 'crm__whoami', arguments: {} })) as CallToolResult;
    assert.deepEqual(retried.content, [{ type: 'text', text: 'third-party user: erin-at-acme' }]);
    assert.ok(!(await crm.seenAuthorizations()).some((h) => h.includes(mcpToken)), "the client's own token never reached the backend");
  } finally {
    await client.close();
  }
});
