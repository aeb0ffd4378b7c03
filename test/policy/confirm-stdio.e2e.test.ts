/**
 * `effect: confirm` on a stdio backend (issue 46 §6), which the gateway reaches through its
 * local bridge (src/backends/bridge/). Such a backend runs only on a single replica without
 * Redis (the config refuses it beside `redis`), so this is the one confirm test on the memory
 * store: the real OAuth server, the stdio fixture as a child process, the v1 SDK client
 * declaring URL elicitation, Chromium on the approval page. Held → approved → the retry is
 * answered by the child; the same call again is held.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { heldCall } from '../helpers/confirm-rig.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { nodeEntry } from '../helpers/node-entry.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/stdio-backend.ts', import.meta.url));
let oauth: OAuthHandle;
let browser: BrowserHandle;
let gateway: GatewayHandle;
let client: Client | undefined;

before(async () => {
  [oauth, browser] = await Promise.all([startOAuthServer(), launchBrowser()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: 'local', transport: 'stdio', command: process.execPath, args: nodeEntry(FIXTURE), timeout: '15s' }],
    overrides: {
      policy: { rules: [{ name: 'local-echoes', effect: 'confirm', when: 'mcp.tool.name == "echo"' }] },
      auth: { issuer: oauth.issuer, audience: 'https://switchboard.test/stdio', algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
});

after(async () => {
  await client?.close();
  await browser?.close();
  await gateway?.close();
  await oauth?.stop();
});

const textOf = (result: unknown) => ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text).join(' ');

test('a stdio backend through the local bridge: held, approved in the browser, answered by the child once approved', async () => {
  const token = await oauth.token({ sub: 'alice', aud: 'https://switchboard.test/stdio' });
  client = new Client({ name: 'confirm-stdio', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('local'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  await client.listTools();
  const args = { text: 'hello through the local bridge' };
  const asked = await heldCall(client, 'echo', args);

  const context = await browser.newContext();
  await context.addCookies([oauth.subjectCookie('alice'), oauth.claimsCookie({ name: 'Alice Example' })]);
  const page = await context.newPage();
  assert.equal((await page.goto(asked.url))?.status(), 200);
  const text = (await page.textContent('body')) ?? '';
  assert.match(text, /Server\s*local\b/);
  assert.match(text, /Echoes its text/);
  assert.deepEqual(JSON.parse((await page.locator('pre code').textContent()) ?? ''), args);
  await Promise.all([page.waitForURL(/\/approve$/), page.click('button[value="approve"]')]);
  assert.match((await page.textContent('body')) ?? '', /Call approved/);
  await context.close();

  assert.match(textOf(await client.callTool({ name: 'echo', arguments: args })), /hello through the local bridge/);
  const again = await heldCall(client, 'echo', args);
  assert.notEqual(again.elicitationId, asked.elicitationId, 'used once: the same call again is held anew');
});
