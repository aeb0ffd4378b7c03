/**
 * `effect: confirm` end to end (issue 46, first slice), with real parts only: Redis shared by
 * two gateway replicas, the real OAuth server (the MCP tokens and the browser sign-in), the
 * bank backend (test/fixtures/bank-backend.ts, which records every call that reaches it), the
 * official SDK client v1 declaring URL-mode elicitation, and Chromium on the approval page.
 *
 * Held → the page (who asks by name, the tool's description, the exact arguments escaped) →
 * approved → the retry on the other replica runs once; the same call again is held again and
 * the old link is spent; changed arguments, and a reloaded policy, need a new approval;
 * another user sees nothing of the call; a denial is final; an approval expires with its
 * `ttl`; a client without URL elicitation gets the link as text; `/mcp` and WebSocket hold a
 * call the same way. No argument value and no token is logged.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { CONFIRM_AUDIENCE as AUDIENCE, decideOn as decide, heldCall as held, openedAs, startConfirmRig, type ConfirmRig, type UrlElicitation } from '../helpers/confirm-rig.js';
import type { GatewayHandle } from '../helpers/gateway.js';
import { WsTransport } from '../helpers/ws-transport.js';

/** A value no log line may carry (it is an argument of the held calls). */
const MEMO = 'memo-never-logged <b>rent</b> & "more"';
let rig: ConfirmRig;

before(async () => {
  rig = await startConfirmRig({
    name: 'confirm',
    rules: [
      { name: 'big-transfers', effect: 'confirm', when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount >= 1000' },
      { name: 'deletes', effect: 'confirm', when: 'mcp.tool.name == "delete_account"', ttl: '10s' },
    ],
  });
});

after(async () => {
  await rig?.close();
});

/** Where a client connects: `/mcp/bank`, the aggregated `/mcp`, or `/ws/mcp/bank` (WebSocket). */
type Path = 'backend' | 'aggregated' | 'websocket';

function transportTo(gateway: GatewayHandle, path: Path, token: string): Transport {
  const headers = { Authorization: `Bearer ${token}` };
  if (path === 'websocket') return new WsTransport(`${gateway.url.replace(/^http/, 'ws')}/ws/mcp/bank`, headers);
  return new StreamableHTTPClientTransport(path === 'aggregated' ? new URL(`${gateway.url}/mcp`) : gateway.endpoint('bank'), { requestInit: { headers } });
}

/** An SDK client of `sub` on a replica; `url`: whether it declares URL-mode elicitation. */
async function clientOf(gateway: GatewayHandle, sub: string, url = true, path: Path = 'backend'): Promise<Client> {
  const token = await rig.idp.token({ sub, aud: AUDIENCE });
  const client = new Client({ name: 'confirm-client', version: '1.0.0' }, { capabilities: { elicitation: url ? { form: {}, url: {} } : { form: {} } } });
  await client.connect(transportTo(gateway, path, token));
  rig.clients.push(client);
  return client;
}

/** A signed-in browser of `sub` (its ID token names it `name`) at the link. */
const opened = (link: string, sub: string, name?: string) => openedAs(rig, link, sub, name ? { name, email: `${sub}@example.com` } : undefined);

/** A call held, then decided on its page by its caller. */
async function heldAndDecided(client: Client, args: Record<string, unknown>, action: 'approve' | 'deny'): Promise<{ asked: UrlElicitation; page: Page }> {
  const asked = await held(client, 'transfer', args);
  const { page } = await opened(asked.url, 'alice', 'Alice Example');
  assert.match(await decide(page, action), action === 'approve' ? /Call approved/ : /Call denied/);
  return { asked, page };
}

const transfers = () => rig.bank.calls.filter((c) => c === 'transfer').length;

describe('a call held for confirmation', () => {
  test('held, shown to its caller only, approved, and run once by the retry on the other replica', async () => {
    const onA = await clientOf(rig.replicaA, 'alice');
    await onA.listTools();
    const args = { amount: 5000, to: 'bob', memo: MEMO };
    const elicitation = await held(onA, 'transfer', args);
    const link = new URL(elicitation.url);
    assert.equal(link.origin + link.pathname, `${rig.replicaA.url}/approve`);
    assert.deepEqual([...link.searchParams.keys()], ['id']);
    assert.equal(transfers(), 0, 'nothing reached the backend');

    // Another signed-in user: refused, and nothing of the call is shown.
    const other = await opened(link.href, 'mallory', 'Mallory');
    assert.equal(other.status, 403);
    assert.match(other.text, /not for your account/i);
    for (const secret of ['transfer', '5000', 'memo-never-logged', 'big-transfers', 'bank']) assert.ok(!other.text.includes(secret), `the refusal shows nothing of the call (${secret})`);
    assert.equal(await other.page.locator('button[value="approve"]').count(), 0);

    // The caller sees who asks by name, the tool, its description, the exact arguments and the rule.
    const mine = await opened(link.href, 'alice', 'Alice Example');
    assert.equal(mine.status, 200);
    assert.match(mine.text, /Alice Example/);
    assert.ok(!/Asked by\s*alice\b/.test(mine.text), 'the person is named, not their sub');
    assert.match(mine.text, /The bank's transfer/);
    assert.match(mine.text, /big-transfers/);
    const shown = (await mine.page.locator('pre code').textContent()) ?? '';
    assert.deepEqual(JSON.parse(shown), args, 'the arguments, pretty-printed, exactly');
    assert.match(await mine.page.locator('pre code').innerHTML(), /&lt;b&gt;rent&lt;\/b&gt; &amp; \\"more\\"/);
    assert.match(await decide(mine.page, 'approve'), /Call approved/);
    assert.equal(transfers(), 0, 'approving does not run the call');

    // The retry, from another session on the other replica, members in another order: runs once.
    const onB = await clientOf(rig.replicaB, 'alice');
    const result = await onB.callTool({ name: 'transfer', arguments: { memo: MEMO, to: 'bob', amount: 5000 } });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal(transfers(), 1);

    // The same call again is held again, with a new link; the old one is spent.
    const again = await held(onB, 'transfer', args);
    assert.notEqual(again.elicitationId, elicitation.elicitationId);
    assert.equal(transfers(), 1, 'no replay');
    const spent = await mine.page.goto(link.href);
    assert.equal(spent?.status(), 410);
  });

  test('changed arguments need a new approval', async () => {
    const client = await clientOf(rig.replicaA, 'alice');
    const before = transfers();
    const { asked: first } = await heldAndDecided(client, { amount: 2000, to: 'carol' }, 'approve');
    const changed = await held(client, 'transfer', { amount: 2001, to: 'carol' });
    assert.notEqual(changed.elicitationId, first.elicitationId);
    assert.equal(transfers(), before);
    await client.callTool({ name: 'transfer', arguments: { amount: 2000, to: 'carol' } });
    assert.equal(transfers(), before + 1, 'the approved arguments still go through, once');
  });

  test('a denial is final', async () => {
    const before = transfers();
    const client = await clientOf(rig.replicaB, 'alice');
    const { asked, page } = await heldAndDecided(client, { amount: 9000, to: 'dave' }, 'deny');
    const refused = await client.callTool({ name: 'transfer', arguments: { amount: 9000, to: 'dave' } }).then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(refused instanceof McpError);
    assert.equal(refused.code, -32015);
    const reopened = await page.goto(asked.url);
    assert.equal(reopened?.status(), 410, 'a denied request cannot be approved afterwards');
    assert.equal(transfers(), before);
  });

  test('an approval expires with its ttl', async () => {
    const client = await clientOf(rig.replicaA, 'alice');
    const asked = await held(client, 'delete_account', { id: 'acc-1' });
    const page = await opened(asked.url, 'alice', 'Alice Example');
    assert.equal(page.status, 200);
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    const expired = await decide(page.page, 'approve');
    assert.match(expired, /not for your account, or it has expired|made for another account, or it has expired/);
    const again = await held(client, 'delete_account', { id: 'acc-1' });
    assert.notEqual(again.elicitationId, asked.elicitationId);
    assert.ok(!rig.bank.calls.includes('delete_account'));
  });

  test('a client without URL elicitation gets the link as text, never a form', async () => {
    const client = await clientOf(rig.replicaA, 'alice', false);
    let formAsked = false;
    client.setRequestHandler((await import('@modelcontextprotocol/sdk/types.js')).ElicitRequestSchema, async () => {
      formAsked = true;
      return { action: 'decline' };
    });
    const result = await client.callTool({ name: 'transfer', arguments: { amount: 3000, to: 'erin' } });
    assert.equal(result.isError, true);
    const text = (result.content as Array<{ type: string; text: string }>)[0]!.text;
    assert.match(text, new RegExp(`Open ${rig.replicaA.url}/approve\\?id=[A-Za-z0-9_-]{32} in your browser`));
    assert.equal(formAsked, false);
  });

  test('/mcp: a call of a member is held with the real backend and tool on the page, and runs once approved', async () => {
    const client = await clientOf(rig.replicaB, 'alice', true, 'aggregated');
    assert.ok((await client.listTools()).tools.some((t) => t.name === 'bank__transfer'));
    const before = transfers();
    const args = { amount: 4000, to: 'frank' };
    const asked = await held(client, 'bank__transfer', args);
    const { page, text } = await opened(asked.url, 'alice', 'Alice Example');
    assert.match(text, /Server\s*bank\b/);
    assert.match(text, /The bank's transfer/);
    assert.match(await decide(page, 'approve'), /Call approved/);
    const result = await client.callTool({ name: 'bank__transfer', arguments: args });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal(transfers(), before + 1);
    await held(client, 'bank__transfer', args);
    assert.equal(transfers(), before + 1, 'no replay on /mcp either');
  });

  test('WebSocket: held, approved, and run once', async () => {
    const client = await clientOf(rig.replicaA, 'alice', true, 'websocket');
    const before = transfers();
    const args = { amount: 6000, to: 'hank' };
    await heldAndDecided(client, args, 'approve');
    assert.equal(transfers(), before);
    const result = await client.callTool({ name: 'transfer', arguments: args });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal(transfers(), before + 1);
    await held(client, 'transfer', args);
    assert.equal(transfers(), before + 1, 'no replay over WebSocket either');
  });

  test('a reloaded policy needs a new approval', async () => {
    const client = await clientOf(rig.replicaA, 'alice');
    const before = transfers();
    const args = { amount: 7000, to: 'gina' };
    const { asked } = await heldAndDecided(client, args, 'approve');
    // One more rule, which decides nothing: the policy, and so its version, changed.
    const reloaded = (gateway: GatewayHandle) => {
      const { policy } = gateway.config;
      return gateway.app.applyConfig({ ...gateway.config, policy: { ...policy, rules: [...policy.rules, { name: 'reloaded', effect: 'allow', when: 'false' }] } });
    };
    assert.equal(reloaded(rig.replicaA), 'applied');
    assert.equal(reloaded(rig.replicaB), 'applied');
    const again = await held(client, 'transfer', args);
    assert.notEqual(again.elicitationId, asked.elicitationId);
    assert.equal(transfers(), before, 'the approval under the old policy does not unlock the call');
  });

  test('no argument value and no token in any log line', () => {
    const logs = rig.logLines.join('');
    assert.match(logs, /call held for confirmation/);
    assert.match(logs, /confirmed call goes through/);
    assert.ok(!logs.includes('memo-never-logged'), 'argument values are not logged');
    assert.ok(!/eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}/.test(logs), 'no JWT is logged');
  });
});
