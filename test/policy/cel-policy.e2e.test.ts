/**
 * `policy.rules` and the audit trail end to end (issue 30 §2–§3): a real OAuth server mints
 * tokens with groups and tenant claims, real redis holds the state, real SDK backends of both
 * eras sit behind the gateway, and the audit goes to a real file.
 *
 *   bank      2025-11-25 backend (v1 SDK)        /mcp/bank, /mcp, and the 2026→2025 bridge
 *   bank26    2026-07-28 backend (server 2.4.0)  the stateless path
 *   acme-crm  2025-11-25 backend                 per-tenant: only tenant acme
 *
 * alice: groups [admins], org acme. bob: groups [ops], org globex.
 *
 * Each test stands alone (issue 41 §8): the servers are shared, but a test reads only the
 * audit records its own calls wrote (`recordsSince`), so any one of them runs by itself.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { BankBackend } from '../fixtures/bank-backend.js';
import { startBankGateway, type BankGateway } from '../helpers/bank-gateway.js';
import { withDeadline } from '../helpers/deadline.js';
import type { GatewayHandle } from '../helpers/gateway.js';
import { statelessCall } from '../helpers/stateless-call.js';

const RULES = [
  { name: 'admins-delete', effect: 'deny', when: 'mcp.tool.name.startsWith("delete_") && !("admins" in jwt.groups)' },
  { name: 'small-transfers', effect: 'allow', when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount < 1000' },
  { name: 'no-other-transfers', effect: 'deny', when: 'mcp.tool.name == "transfer"' },
  { name: 'acme-only', effect: 'deny', when: 'mcp.backend == "acme-crm" && jwt.org != "acme"' },
] as const;
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

let setup: BankGateway | undefined, gateway: GatewayHandle | undefined;
/** The 2025-11-25 and the 2026-07-28 backend. */
let bank: BankBackend | undefined, bank26: BankBackend | undefined;
let alice = '', bob = '';
const clients: Client[] = [];

before(async () => {
  setup = await startBankGateway({
    more: (url) => [{ name: 'acme-crm', url, protocol: '2025-11-25' }],
    overrides: (path) => ({ policy: { rules: [...RULES] }, audit: { sink: 'file', path, flushInterval: 0, claims: ['email'], arguments: { include: true, maxBytes: 256 } } }),
  });
  ({ gateway, bank, bank26 } = setup);
  // tenantClaim goes with the audience the helper computed.
  const claims = (org: string, groups: string[], email: string) => ({ org, groups, email });
  [alice, bob] = await Promise.all([
    setup.oauth.token({ sub: 'alice', aud: gateway.audience, scope: 'mcp', claims: claims('acme', ['admins'], 'alice@acme.example') }),
    setup.oauth.token({ sub: 'bob', aud: gateway.audience, scope: 'mcp', claims: claims('globex', ['ops'], 'bob@globex.example') }),
  ]);
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await setup?.close();
});

async function connect(path: string, token: string): Promise<Client> {
  const client = new Client({ name: 'policy-e2e', version: '1.0.0' });
  const headers = { Authorization: `Bearer ${token}`, traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` };
  await withDeadline(client.connect(new StreamableHTTPClientTransport(new URL(`${gateway!.url}${path}`), { requestInit: { headers } })), 10_000, `connect ${path}`);
  clients.push(client);
  return client;
}

/** How many audit records there are now: where the records of a test's own calls begin (`recordsSince`). */
const mark = async () => (await setup!.records()).length;

/** The records written since `from`, once `until` holds for them (the file is written as calls end), within 5 s. */
async function recordsSince(from: number, until: (records: Array<Record<string, unknown>>) => boolean): Promise<Array<Record<string, unknown>>> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const records = (await setup!.records()).slice(from);
    if (until(records)) return records;
    assert.ok(Date.now() < deadline, `the audit records expected did not come: ${JSON.stringify(records)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const rejectsWith = (code: number) => (err: unknown) => err instanceof McpError && err.code === code;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('CEL rules on /mcp/{backend}', () => {
  test('delete_* is hidden and refused unless jwt.groups contains admins', async () => {
    const from = await mark();
    const asBob = await connect('/mcp/bank', bob);
    const names = (await asBob.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['list_accounts', 'transfer'], 'transfer is listed: some amounts are allowed');
    const before = bank!.calls.length;
    await assert.rejects(asBob.callTool({ name: 'delete_account', arguments: { id: 'a1' } }), rejectsWith(-32602));
    assert.deepEqual(bank!.calls.slice(before), [], 'the refusal never reached the backend');

    const asAlice = await connect('/mcp/bank', alice);
    assert.ok((await asAlice.listTools()).tools.some((t) => t.name === 'delete_account'));
    await asAlice.callTool({ name: 'delete_account', arguments: { id: 'a1' } });
    assert.deepEqual(bank!.calls.slice(before), ['delete_account']);
    const deletes = (records: Array<Record<string, unknown>>) => records.filter((r) => r.tool === 'delete_account').map((r) => [r.decision, r.rule]);
    assert.deepEqual(deletes(await recordsSince(from, (records) => deletes(records).length >= 2)), [['deny', 'admins-delete'], ['allow', 'policy.default']]);
  });

  test('transfer is allowed only when mcp.tool.arguments.amount < 1000, judged with the arguments', async () => {
    const asBob = await connect('/mcp/bank', bob);
    const before = bank!.calls.length;
    await asBob.callTool({ name: 'transfer', arguments: { to: 'carol', amount: 999 } });
    await assert.rejects(asBob.callTool({ name: 'transfer', arguments: { amount: 1000, to: 'carol' } }), rejectsWith(-32015));
    await assert.rejects(asBob.callTool({ name: 'transfer', arguments: { to: 'carol' } }), rejectsWith(-32015), 'no amount: the allow rule fails, the deny rule decides');
    assert.deepEqual(bank!.calls.slice(before), ['transfer']);
  });

  test('a per-tenant backend: acme-crm refuses every request of a user of another tenant', async () => {
    const from = await mark();
    const asAlice = await connect('/mcp/acme-crm', alice);
    assert.ok((await asAlice.listTools()).tools.length === 3);
    const asBob = await connect('/mcp/acme-crm', bob);
    await assert.rejects(asBob.listTools(), rejectsWith(-32015));
    await assert.rejects(asBob.callTool({ name: 'list_accounts', arguments: {} }), rejectsWith(-32602), 'no call of it could be allowed: an unknown tool');
    await assert.rejects(asBob.readResource({ uri: 'bank://rates' }), rejectsWith(-32002), 'no read of it could be allowed: not found');
    await recordsSince(from, (records) => records.some((r) => r.backend === 'acme-crm' && r.method === 'resources/read' && r.rule === 'acme-only'));
  });

  test('the audit record of an allowed and of a denied call carries the rule, the argument hash and the trace id', async () => {
    const from = await mark();
    const asBob = await connect('/mcp/bank', bob);
    await asBob.callTool({ name: 'transfer', arguments: { to: 'carol', amount: 999 } });
    await assert.rejects(asBob.callTool({ name: 'transfer', arguments: { amount: 1000, to: 'carol' } }), rejectsWith(-32015));
    const all = await recordsSince(from, (records) => records.filter((r) => r.tool === 'transfer').length >= 2);
    const allowed = all.find((r) => r.tool === 'transfer' && r.decision === 'allow');
    assert.ok(allowed, JSON.stringify(all));
    assert.equal(allowed.schema, 'switchboard.audit/v1');
    assert.equal(allowed.rule, 'small-transfers');
    assert.equal(allowed.outcome, 'ok');
    assert.equal(allowed.endpoint, '/mcp/bank');
    assert.equal(allowed.backend, 'bank');
    assert.equal(allowed.argumentsSha256, sha256('{"amount":999,"to":"carol"}'), 'RFC 8785: keys sorted');
    assert.deepEqual(allowed.arguments, { to: 'carol', amount: 999 });
    assert.equal(allowed.traceId, TRACE_ID);
    assert.deepEqual(allowed.claims, { email: 'bob@globex.example' });
    assert.equal(typeof allowed.session, 'string');
    assert.equal(typeof allowed.durationMs, 'number');
    assert.doesNotMatch(JSON.stringify(allowed), /"bob"/, 'the raw sub is not in the record');

    const denied = all.find((r) => r.tool === 'transfer' && r.decision === 'deny' && (r.arguments as { amount?: number } | undefined)?.amount === 1000);
    assert.ok(denied);
    assert.equal(denied.rule, 'no-other-transfers');
    assert.equal(denied.outcome, 'error');
    assert.equal(denied.code, -32015);
    assert.equal(denied.argumentsSha256, sha256('{"amount":1000,"to":"carol"}'));
    assert.equal(denied.traceId, TRACE_ID);
  });
});

describe('CEL rules on the other paths', () => {
  test('/mcp: members are listed and judged with the same rules', async () => {
    const from = await mark();
    const asBob = await connect('/mcp', bob);
    const names = (await asBob.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes('bank__transfer') && !names.includes('bank__delete_account'), names.join());
    await assert.rejects(asBob.callTool({ name: 'bank__transfer', arguments: { amount: 5000 } }), rejectsWith(-32015));
    const record = (await recordsSince(from, (records) => records.some((r) => r.endpoint === '/mcp' && r.tool === 'transfer'))).find((r) => r.endpoint === '/mcp' && r.tool === 'transfer');
    assert.equal(record?.rule, 'no-other-transfers');
    assert.equal(record?.backend, 'bank');
  });

  test('the 2026-07-28 stateless path and the bridge to a 2025-11-25 backend', async () => {
    const call = (backend: string, token: string, name: string, args: Record<string, unknown>, id: number) =>
      statelessCall({ endpoint: new URL(`${gateway!.url}/mcp/${backend}`), token, id, name, extra: { arguments: args } });
    const from = await mark();
    const before = { modern: bank26!.calls.length, legacy: bank!.calls.length };
    assert.equal((await call('bank26', bob, 'transfer', { amount: 10 }, 1)).result?.content?.[0]?.text, 'transfer done');
    assert.equal((await call('bank26', bob, 'transfer', { amount: 10_000 }, 2)).error?.code, -32015);
    assert.equal((await call('bank26', bob, 'delete_account', {}, 3)).error?.code, -32602);
    assert.equal((await call('bank', bob, 'delete_account', {}, 4)).error?.code, -32602, 'through the bridge');
    assert.equal((await call('bank', alice, 'delete_account', {}, 5)).result?.content?.[0]?.text, 'delete_account done');
    assert.deepEqual(bank26!.calls.slice(before.modern), ['transfer']);
    assert.deepEqual(bank!.calls.slice(before.legacy), ['delete_account']);
    const modern = (records: Array<Record<string, unknown>>) => records.filter((r) => r.backend === 'bank26');
    const stateless = modern(await recordsSince(from, (records) => modern(records).length >= 3));
    assert.deepEqual(stateless.map((r) => [r.decision, r.rule, r.outcome]), [['allow', 'small-transfers', 'ok'], ['deny', 'no-other-transfers', 'error'], ['deny', 'admins-delete', 'error']]);
  });

  test('no token, cookie or credential appears anywhere in the audit output', async () => {
    const from = await mark();
    // Records of both users, allowed and denied, on a session path and the stateless one.
    const asAlice = await connect('/mcp/bank', alice);
    await asAlice.callTool({ name: 'list_accounts', arguments: {} });
    await assert.rejects((await connect('/mcp/bank', bob)).callTool({ name: 'transfer', arguments: { amount: 5000 } }), rejectsWith(-32015));
    assert.equal((await statelessCall({ endpoint: new URL(`${gateway!.url}/mcp/bank26`), token: bob, id: 1, name: 'transfer', extra: { arguments: { amount: 10 } } })).result?.content?.[0]?.text, 'transfer done');
    await recordsSince(from, (records) => records.length >= 3);
    const text = await readFile(setup!.auditPath, 'utf8');
    for (const token of [alice, bob]) {
      for (const part of token.split('.')) assert.ok(!text.includes(part), 'no part of a token');
    }
    assert.doesNotMatch(text, /bearer|authorization|cookie|requestState|"sub"/i);
  });
});
