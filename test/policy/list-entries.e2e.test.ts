/**
 * `policy.rules` filter `prompts/list`, `resources/list` and `resources/templates/list` entry
 * by entry, as they filter `tools/list` (issue 30 §3: "a tool is listed when some call of it
 * could be allowed"), and a request for a hidden entry is refused as if it did not exist, and
 * audited. Real parts: an OAuth server, Redis, the bank backend of both eras (v1 SDK 2025-11-25,
 * server 2.4.0 2026-07-28), the audit to a file; on `/mcp/{backend}`, on `/mcp` and on the
 * 2026-07-28 stateless path.
 *
 * alice: groups [admins]. bob: groups [ops]. gus: groups [guests].
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { startBankGateway, type BankGateway } from '../helpers/bank-gateway.js';
import { withDeadline } from '../helpers/deadline.js';
import { statelessMeta } from '../helpers/stateless-call.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

/** Every rule here refuses: what is not named is allowed (`policy.default`). */
const deny = (name: string, when: string) => ({ name, effect: 'deny' as const, when });
const RULES = [
  deny('statement-admins', 'mcp.prompt.name == "statement" && !("admins" in jwt.groups)'),
  deny('ledger-admins', 'mcp.resource.uri == "bank://ledger" && !("admins" in jwt.groups)'),
  deny('accounts-admins', 'mcp.resource.uri.startsWith("bank://accounts/") && !("admins" in jwt.groups)'),
  deny('guests-read-nothing', 'mcp.method == "resources/read" && "guests" in jwt.groups'),
];

let bank: BankGateway | undefined;
const tokens: Record<string, string> = {};
const clients: Client[] = [];

before(async () => {
  bank = await startBankGateway({ overrides: (path) => ({ policy: { rules: RULES }, audit: { sink: 'file', path, flushInterval: 0 } }) });
  for (const [sub, groups] of [['alice', ['admins']], ['bob', ['ops']], ['gus', ['guests']]] as const) {
    tokens[sub] = await bank.oauth.token({ sub, aud: bank.gateway.audience, claims: { groups } });
  }
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await bank?.close();
});

async function connect(path: string, user: string): Promise<Client> {
  const client = new Client({ name: 'list-entries', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${bank!.gateway.url}${path}`), { requestInit: { headers: { Authorization: `Bearer ${tokens[user]}` } } });
  await withDeadline(client.connect(transport), 10_000, `connect ${path}`);
  clients.push(client);
  return client;
}

/** What a user sees of the bank's prompts, resources and templates through `client`. */
async function listed(client: Client) {
  return {
    prompts: (await client.listPrompts()).prompts.map((p) => p.name).sort(),
    resources: (await client.listResources()).resources.map((r) => r.uri).sort(),
    templates: (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate).sort(),
  };
}

const rejectsWith = (code: number) => (err: unknown) => err instanceof McpError && err.code === code;

test('/mcp/{backend}: each prompt, resource and template is listed when some request for it could be allowed', async () => {
  assert.deepEqual(await listed(await connect('/mcp/bank', 'alice')), { prompts: ['fees', 'statement'], resources: ['bank://ledger', 'bank://rates'], templates: ['bank://accounts/{id}'] });
  // bob: the template stays, since its URIs are unknown and the rule that could refuse them reads the URI.
  assert.deepEqual(await listed(await connect('/mcp/bank', 'bob')), { prompts: ['fees'], resources: ['bank://rates'], templates: ['bank://accounts/{id}'] });
  // gus: no read at all could be allowed, whatever the URI: no resource and no template.
  assert.deepEqual(await listed(await connect('/mcp/bank', 'gus')), { prompts: ['fees'], resources: [], templates: [] });
});

test('/mcp/{backend}: a request for a hidden entry is refused as for one that does not exist, and audited', async () => {
  const bob = await connect('/mcp/bank', 'bob');
  await assert.rejects(bob.getPrompt({ name: 'statement' }), rejectsWith(-32602));
  await assert.rejects(bob.readResource({ uri: 'bank://ledger' }), rejectsWith(-32002));
  await assert.rejects(bob.readResource({ uri: 'bank://accounts/7' }), rejectsWith(-32002), 'a template is judged by the URI read');
  assert.equal(JSON.stringify((await bob.readResource({ uri: 'bank://rates' })).contents), JSON.stringify([{ uri: 'bank://rates', text: '1%' }]));
  assert.equal((await bob.getPrompt({ name: 'fees' })).messages.length, 1);
  const alice = await connect('/mcp/bank', 'alice');
  assert.equal(JSON.stringify((await alice.readResource({ uri: 'bank://accounts/7' })).contents), JSON.stringify([{ uri: 'bank://accounts/7', text: 'account' }]));

  const refusals = (await bank!.records()).filter((r) => r.event === 'refusal').map((r) => [r.method, r.prompt ?? r.uri, r.rule, r.code]);
  assert.deepEqual(refusals, [
    ['prompts/get', 'statement', 'statement-admins', -32602],
    ['resources/read', 'bank://ledger', 'ledger-admins', -32002],
    ['resources/read', 'bank://accounts/7', 'accounts-admins', -32002],
  ]);
});

test('/mcp: the members\' entries are filtered with the same rules', async () => {
  const bob = await listed(await connect('/mcp', 'bob'));
  assert.ok(!bob.prompts.some((p) => p.includes('statement')) && bob.prompts.some((p) => p.includes('fees')), bob.prompts.join());
  assert.ok(!bob.resources.some((r) => r.includes('ledger')) && bob.resources.some((r) => r.includes('rates')), bob.resources.join());
  const alice = await listed(await connect('/mcp', 'alice'));
  assert.ok(alice.prompts.some((p) => p.includes('statement')) && alice.resources.some((r) => r.includes('ledger')), JSON.stringify(alice));
  const gus = await listed(await connect('/mcp', 'gus'));
  assert.deepEqual([gus.resources, gus.templates], [[], []]);
});

/** One 2026-07-28 request on the raw wire; its answer. */
async function stateless(user: string, method: string, params: Record<string, unknown>, name?: string): Promise<{ result?: Record<string, unknown[]>; error?: { code: number } }> {
  const res = await fetch(`${bank!.gateway.url}/mcp/bank26`, {
    method: 'POST',
    headers: statelessHeaders(tokens[user]!, method, name),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: statelessMeta({}) } }),
  });
  return res.json() as Promise<{ result?: Record<string, unknown[]>; error?: { code: number } }>;
}

test('the 2026-07-28 stateless path filters and refuses the same way', async () => {
  const names = (answer: { result?: Record<string, unknown[]> }, key: string, field: string) => (answer.result?.[key] ?? []).map((e) => (e as Record<string, string>)[field]).sort();
  assert.deepEqual(names(await stateless('bob', 'prompts/list', {}), 'prompts', 'name'), ['fees']);
  assert.deepEqual(names(await stateless('bob', 'resources/list', {}), 'resources', 'uri'), ['bank://rates']);
  assert.deepEqual(names(await stateless('gus', 'resources/templates/list', {}), 'resourceTemplates', 'uriTemplate'), []);
  assert.deepEqual(names(await stateless('alice', 'resources/list', {}), 'resources', 'uri'), ['bank://ledger', 'bank://rates']);
  assert.equal((await stateless('bob', 'prompts/get', { name: 'statement' }, 'statement')).error?.code, -32602);
  assert.equal((await stateless('bob', 'resources/read', { uri: 'bank://ledger' }, 'bank://ledger')).error?.code, -32002);
});
