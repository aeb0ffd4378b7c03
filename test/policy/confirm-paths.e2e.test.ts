/**
 * `effect: confirm` on the paths a call can come from beyond `/mcp/{backend}`, `/mcp` and
 * WebSocket (confirm-approval.e2e): the MCP 2026-07-28 revision and the bridges between the
 * eras, a virtual server, and `call_tool` of tool search (issue 46 §2, §6). Real parts only:
 * two gateway replicas on one Redis, the real OAuth server, the bank backend twice — `bank`
 * speaking 2025-11-25 only (v1 SDK server), `vault` 2026-07-28 only (v2 SDK server), each
 * recording the calls that reach it — the official SDK clients of both revisions, and Chromium
 * on the approval page.
 *
 * - A 2026 client (`@modelcontextprotocol/client`, pinned to 2026-07-28) gets `input_required`
 *   with a URL-mode `elicitation/create` of the page and a sealed `requestState`; the user
 *   approves in Chromium; the client resends with its `requestState` to the other replica and
 *   the call runs once — on a 2026 backend, through the bridge to a 2025 backend, and on `/mcp`.
 *   A tampered `requestState`, another user's, or one of other arguments or another endpoint,
 *   is refused, and nothing runs.
 * - A 2025 client on the 2026 backend (the other bridge): -32042, approved, runs once.
 * - A virtual server: the page shows the server and tool as the client saw them, and the real
 *   backend and tool; `call_tool` of tool search is held as a direct call is.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CONFIRM_AUDIENCE as AUDIENCE, decideOn, heldCall, openedAs, startConfirmRig, type ConfirmRig } from '../helpers/confirm-rig.js';
import { statelessCall } from '../helpers/stateless-call.js';

/** A value no log line may carry (an argument of the held calls). */
const MEMO = 'memo-of-the-paths-never-logged';
/** The OAuth client the MCP tokens name (`client_id`, RFC 9068); the page shows it (no broker here: no registered name). */
const CLIENT_ID = 'desk-app <b>v2</b>';
let rig: ConfirmRig;
const v2Clients: V2Client[] = [];

before(async () => {
  rig = await startConfirmRig({
    name: 'confirm-paths',
    banks: [
      { name: 'bank', kind: 'legacy' },
      { name: 'vault', kind: 'modern' },
    ],
    rules: [{ name: 'big-transfers', effect: 'confirm', when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount >= 1000' }],
    overrides: () => ({
      servers: [{ name: 'desk', title: 'Front desk', tools: [{ from: 'bank.transfer', as: 'pay', title: 'Pay someone' }] }],
      // Tool search on /mcp whatever the number of tools: tools/list shows search_tools and call_tool.
      discovery: { threshold: 0 },
    }),
  });
});

after(async () => {
  await Promise.allSettled(v2Clients.map((c) => c.close()));
  await rig?.close();
});

const transfersOn = (bank: string) => rig.banks[bank]!.calls.filter((c) => c === 'transfer').length;
const textOf = (result: unknown) => ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text).join(' ');
const tokenOf = (sub: string) => rig.idp.token({ sub, aud: AUDIENCE, claims: { client_id: CLIENT_ID } });

/** The load balancer: each request to the next replica. `tamper`: whether to change one character of a requestState sent. */
function alternating(tamper: () => boolean): typeof fetch {
  let next = 0;
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    const target = new URL(url.pathname + url.search, [rig.replicaA, rig.replicaB][next++ % 2]!.url);
    const body = tamper() && typeof init?.body === 'string' ? tampered(init.body) : init?.body;
    return fetch(target, { ...init, body });
  };
}

/** Requests whose `requestState` {@link tampered} changed. */
let tamperings = 0;

/** The body with one character of its `params.requestState` changed (in the sealed part, not a separator). */
function tampered(body: string): string {
  const message = JSON.parse(body) as { params?: { requestState?: unknown } };
  const state = message.params?.requestState;
  if (typeof state !== 'string') return body;
  let i = Math.floor(state.length / 2);
  while (state[i] === '.') i++;
  message.params!.requestState = state.slice(0, i) + (state[i] === 'A' ? 'B' : 'A') + state.slice(i + 1);
  tamperings++;
  return JSON.stringify(message);
}

interface Asked {
  mode: string;
  url: string;
  message: string;
}

/** A 2026-07-28 v2 SDK client of `sub` on `path`, declaring URL elicitation only; `onAsk` answers the gateway's input request. */
async function v2ClientOf(path: string, sub: string, onAsk: (asked: Asked) => Promise<'accept' | 'decline'>, tamper: () => boolean = () => false): Promise<V2Client> {
  const client = new V2Client({ name: 'confirm-v2', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
  client.setRequestHandler('elicitation/create', async (request) => ({ action: await onAsk(request.params as unknown as Asked) }));
  const headers = { Authorization: `Bearer ${await tokenOf(sub)}` };
  await client.connect(new V2Transport(new URL(`${rig.replicaA.url}${path}`), { fetch: alternating(tamper), requestInit: { headers } }));
  v2Clients.push(client);
  return client;
}

/** A 2025-11-25 v1 SDK client of alice on `path`, declaring URL elicitation. */
async function v1ClientOf(path: string): Promise<Client> {
  const client = new Client({ name: 'confirm-v1', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${rig.replicaB.url}${path}`), { requestInit: { headers: { Authorization: `Bearer ${await tokenOf('alice')}` } } }));
  rig.clients.push(client);
  return client;
}

/** Alice opens the link in Chromium and approves; the page's text before deciding. */
async function approvedOnPage(url: string): Promise<string> {
  const { page, status, text } = await openedAs(rig, url, 'alice', { name: 'Alice Example', email: 'alice@example.com' });
  assert.equal(status, 200, text);
  assert.match(await decideOn(page, 'approve'), /Call approved/);
  await page.context().close();
  return text;
}

/** The approved call retried by a v1 client: it runs once on `bank`; the same call again is held, and does not run. */
async function runsOnceThenHeld(client: Client, name: string, args: Record<string, unknown>, bank: string, before: number): Promise<void> {
  const result = await client.callTool({ name, arguments: args });
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.equal(transfersOn(bank), before + 1);
  await heldCall(client, name, args);
  assert.equal(transfersOn(bank), before + 1, 'no replay');
}

/** The replica letters whose logs hold `message` for this approval id. */
function replicasLogging(message: string, approvalId: string): string[] {
  return rig.logLines.filter((l) => l.includes(message) && l.includes(approvalId)).map((l) => l[0]!);
}

const idOf = (url: string) => new URL(url).searchParams.get('id')!;

describe('a 2026-07-28 client (v2 SDK): input_required, approved in the browser, resent with its requestState', () => {
  for (const [path, bank, what] of [
    ['/mcp/vault', 'vault', 'a 2026 backend'],
    ['/mcp/bank', 'bank', 'a 2025 backend, through the bridge'],
    ['/mcp', 'bank', 'the aggregated /mcp'],
  ] as const) {
    test(`${what}: held, approved, run once by the retry on the other replica; the same call again is held`, async () => {
      const asked: Asked[] = [];
      let approve = true;
      const client = await v2ClientOf(path, 'alice', async (params) => {
        asked.push(params);
        if (!approve) return 'decline';
        await approvedOnPage(params.url);
        return 'accept';
      });
      const name = path === '/mcp' ? 'bank__transfer' : 'transfer';
      // Arguments of this test's own: the call the previous test left pending would otherwise be this one.
      const args = { amount: 5000, to: `bob via ${path}`, memo: MEMO };
      const before = transfersOn(bank);
      const result = await client.callTool({ name, arguments: args });
      assert.notEqual(result.isError, true, JSON.stringify(result));
      assert.equal(textOf(result), 'transfer done');
      assert.equal(transfersOn(bank), before + 1, 'run once');
      assert.equal(asked.length, 1);
      assert.equal(asked[0]!.mode, 'url', 'never a form');
      assert.match(asked[0]!.url, /^http:\/\/127\.0\.0\.1:\d+\/approve\?id=[A-Za-z0-9_-]{32}$/);
      assert.match(asked[0]!.message, /waits for your confirmation/);
      // Held on one replica, let through by the retry on the other.
      const id = idOf(asked[0]!.url);
      const heldOn = replicasLogging('call held for confirmation', id);
      const ranOn = replicasLogging('confirmed call goes through', id);
      assert.equal(heldOn.length, 1, rig.logLines.filter((l) => l.includes(id)).join(''));
      assert.equal(ranOn.length, 1);
      assert.notEqual(heldOn[0], ranOn[0], 'the retry went through on the other replica');

      // The same call again needs a new approval; declining to open the page runs nothing.
      approve = false;
      const again = await client.callTool({ name, arguments: args });
      assert.equal(again.isError, true);
      assert.match(textOf(again), /approval page was not opened, so this call did not run/);
      assert.equal(asked.length, 2);
      assert.notEqual(idOf(asked[1]!.url), id, 'a new request, with a new link');
      assert.equal(transfersOn(bank), before + 1, 'no replay');
    });
  }

  test('a tampered requestState is refused, and nothing runs', async () => {
    let tamper = false;
    const client = await v2ClientOf(
      '/mcp/vault',
      'alice',
      async (params) => {
        await approvedOnPage(params.url);
        tamper = true;
        return 'accept';
      },
      () => tamper,
    );
    const before = transfersOn('vault');
    const refused = await client.callTool({ name: 'transfer', arguments: { amount: 8000, to: 'tampered' } }).then(
      (result) => new Error(`expected a refusal, got ${JSON.stringify(result)}`),
      (err: unknown) => err as Error,
    );
    assert.match(refused.message, /requestState was not accepted \(invalid\)/);
    assert.equal(tamperings, 1, 'the resend\'s requestState was changed in flight');
    assert.equal(transfersOn('vault'), before);
  });

  test('another user\'s requestState, or one of other arguments or another endpoint, is refused', async () => {
    const endpoint = new URL(`${rig.replicaA.url}/mcp/vault`);
    const capabilities = { elicitation: { url: {} } };
    const args = { amount: 4000, to: 'carol' };
    const alice = await tokenOf('alice');
    const first = await statelessCall({ endpoint, token: alice, id: 1, name: 'transfer', capabilities, extra: { arguments: args } });
    assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first));
    const [key, input] = Object.entries(first.result!.inputRequests!)[0]!;
    assert.equal(input.method, 'elicitation/create');
    assert.equal(input.params.mode, 'url');
    await approvedOnPage(String(input.params.url));
    const before = transfersOn('vault');
    const retry = { requestState: first.result!.requestState!, inputResponses: { [key]: { action: 'accept' } } };

    const bob = await statelessCall({ endpoint, token: await tokenOf('bob'), id: 2, name: 'transfer', capabilities, extra: { arguments: args, ...retry } });
    assert.equal(bob.error?.code, -32602);
    assert.match(bob.error!.message, /requestState was not accepted \(invalid\)/);
    const changed = await statelessCall({ endpoint, token: alice, id: 3, name: 'transfer', capabilities, extra: { arguments: { ...args, amount: 40000 }, ...retry } });
    assert.match(changed.error?.message ?? '', /not accepted \(other-request\)/);
    const elsewhere = await statelessCall({ endpoint: new URL(`${rig.replicaB.url}/mcp/bank`), token: alice, id: 4, name: 'transfer', capabilities, extra: { arguments: args, ...retry } });
    assert.match(elsewhere.error?.message ?? '', /not accepted \(other-endpoint\)/);
    assert.equal(transfersOn('vault'), before, 'nothing ran');

    // Alice's own retry, on the other replica, runs it once.
    const own = await statelessCall({ endpoint: new URL(`${rig.replicaB.url}/mcp/vault`), token: alice, id: 5, name: 'transfer', capabilities, extra: { arguments: args, ...retry } });
    assert.equal(own.result?.resultType, 'complete', JSON.stringify(own));
    assert.equal(transfersOn('vault'), before + 1);
  });

  test('a 2026 client without URL elicitation gets the link as text', async () => {
    const answer = await statelessCall({ endpoint: new URL(`${rig.replicaA.url}/mcp/vault`), token: await tokenOf('alice'), id: 1, name: 'transfer', capabilities: { elicitation: { form: {} } }, extra: { arguments: { amount: 3000, to: 'erin' } } });
    assert.equal(answer.result?.resultType, 'complete', JSON.stringify(answer));
    assert.equal(answer.result?.isError, true);
    assert.match(textOf(answer.result), /Open http:\/\/127\.0\.0\.1:\d+\/approve\?id=[A-Za-z0-9_-]{32} in your browser/);
  });
});

describe('the other paths', () => {
  test('a 2025 client on a 2026 backend (the bridge the other way): -32042, approved, run once', async () => {
    const client = await v1ClientOf('/mcp/vault');
    const before = transfersOn('vault');
    const args = { amount: 6000, to: 'hank' };
    const asked = await heldCall(client, 'transfer', args);
    const text = await approvedOnPage(asked.url);
    assert.match(text, /Server\s*vault\b/);
    assert.equal(transfersOn('vault'), before);
    await runsOnceThenHeld(client, 'transfer', args, 'vault', before);
  });

  test('a virtual server: the page shows the server and tool the client saw, the real backend and tool, and the client', async () => {
    const client = await v1ClientOf('/mcp/desk');
    assert.ok((await client.listTools()).tools.some((t) => t.name === 'pay'));
    const before = transfersOn('bank');
    const args = { amount: 2500, to: 'ivy', memo: MEMO };
    const asked = await heldCall(client, 'pay', args);
    assert.match(asked.message, /"pay" on "desk" waits for your confirmation/);
    const { page, text } = await openedAs(rig, asked.url, 'alice', { name: 'Alice Example' });
    assert.match(text, /Server\s*desk \(a virtual server\)/);
    assert.match(text, /Tool\s*pay\b/);
    assert.match(text, /Runs on\s*bank:\s*transfer/);
    assert.match(text, /The bank's transfer/, 'the real tool\'s description');
    assert.match(await page.locator('dd', { hasText: 'bank:' }).innerHTML(), /<code>transfer<\/code>/);
    assert.match(text, /Client\s*desk-app <b>v2<\/b>/, 'the client id, as text');
    assert.match(await page.locator('dd', { hasText: 'desk-app' }).innerHTML(), /desk-app &lt;b&gt;v2&lt;\/b&gt;/, 'escaped');
    assert.deepEqual(JSON.parse((await page.locator('pre code').textContent()) ?? ''), args, 'the arguments as the backend gets them');
    assert.match(await decideOn(page, 'approve'), /Call approved/);
    await page.context().close();
    await runsOnceThenHeld(client, 'pay', args, 'bank', before);
  });

  test('call_tool of tool search is held as a direct call, and runs once approved', async () => {
    const client = await v1ClientOf('/mcp');
    const listed = (await client.listTools()).tools.map((t) => t.name);
    assert.deepEqual(listed.sort(), ['call_tool', 'search_tools']);
    const found = textOf(await client.callTool({ name: 'search_tools', arguments: { query: 'transfer' } }));
    assert.match(found, /bank__transfer/);
    const before = transfersOn('bank');
    const call = { name: 'bank__transfer', arguments: { amount: 7000, to: 'jo' } };
    const asked = await heldCall(client, 'call_tool', call);
    const text = await approvedOnPage(asked.url);
    assert.match(text, /Server\s*bank\b/);
    assert.match(text, /The bank's transfer/);
    assert.equal(transfersOn('bank'), before);
    await runsOnceThenHeld(client, 'call_tool', call, 'bank', before);
  });

  test('no argument value, token or requestState in any log line', () => {
    const logs = rig.logLines.join('');
    assert.match(logs, /confirmed call goes through/);
    assert.ok(!logs.includes(MEMO), 'argument values are not logged');
    assert.ok(!/eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}/.test(logs), 'no JWT is logged');
    assert.ok(!/sb1\.[A-Za-z0-9_-]{20,}/.test(logs), 'no requestState is logged');
  });
});
