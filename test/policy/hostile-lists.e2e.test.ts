/**
 * Wherever the gateway edits or judges a list answer, an answer it cannot read exactly is
 * refused, never relayed untouched (issue 41 §1): the tool policy (`access.tools`), the CEL
 * rules' listing (`policy.rules`), a virtual server's renamed list and tool search over one.
 * Real parts: an OAuth server, Redis, a gateway, hostile v1 SDK backends
 * (test/fixtures/hostile-backend.ts) that answer `tools/list` with the id as a string, a
 * byte-order mark, the response twice or a batch around it; the client is the official v1 SDK.
 *
 * Each test sets the shape of its own backend first, so none depends on another.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { RUG_PULLED_SEARCH, startHostileBackend, type HostileBackend, type ListShape } from '../fixtures/hostile-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { refused } from '../helpers/refused.js';

const NAMES = ['policed', 'ruled', 'member', 'seeker'] as const;

let idp: OAuthHandle;
let redis: RedisHandle;
let gateway: GatewayHandle;
const backends = {} as Record<(typeof NAMES)[number], HostileBackend>;
const clients: Client[] = [];

before(async () => {
  [idp, redis] = await Promise.all([startOAuthServer(), startRedis()]);
  for (const name of NAMES) backends[name] = await startHostileBackend();
  gateway = await startGateway({
    issuer: idp.issuer,
    redisUrl: redis.url,
    backends: [
      { name: 'policed', url: backends.policed.url, access: { tools: { deny: ['match'] } } },
      { name: 'ruled', url: backends.ruled.url },
      { name: 'member', url: backends.member.url },
      { name: 'seeker', url: backends.seeker.url },
    ],
    overrides: {
      policy: { rules: [{ name: 'no-match', effect: 'deny', when: 'mcp.backend == "ruled" && mcp.tool.name == "match"' }] },
      servers: [
        { name: 'desk', tools: [{ from: 'member.search', as: 'find_notes' }, { from: 'member.stable' }] },
        { name: 'finder', discovery: { threshold: 1 }, tools: [{ from: 'seeker.search' }, { from: 'seeker.stable' }] },
      ],
    },
  });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await Promise.allSettled([...Object.values(backends).map((b) => b.close()), redis?.stop(), idp?.stop()]);
});

async function connect(path: string): Promise<Client> {
  const client = new Client({ name: 'alice', version: '1.0.0' });
  const token = await idp.token({ sub: 'alice', aud: gateway.audience });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.url}${path}`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, `connect ${path}`);
  clients.push(client);
  return client;
}

/** `backend` answers its lists in `shape`, with `search` changed or not. */
function answering(backend: HostileBackend, shape: ListShape, rugPull = false): void {
  backend.shape = shape;
  backend.rugPull = rugPull;
}

for (const shape of ['string-id', 'bom'] as const) {
  test(`tool policy, ${shape}: the list it cannot filter is refused, the denied tool never shown`, async () => {
    answering(backends.policed, 'exact');
    const client = await connect('/mcp/policed');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['search', 'stable'], 'filtered as usual');
    answering(backends.policed, shape);
    const reshaped = backends.policed.reshaped;
    await refused(client.listTools(), -32010, /backend "policed" sent an answer the gateway cannot judge/);
    assert.equal(backends.policed.reshaped, reshaped + 1);
  });

  test(`CEL listing, ${shape}: the list the rules cannot filter is refused, the hidden tool never shown`, async () => {
    answering(backends.ruled, 'exact');
    const client = await connect('/mcp/ruled');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['search', 'stable'], 'filtered as usual');
    answering(backends.ruled, shape);
    await refused(client.listTools(), -32010, /backend "ruled" sent an answer the gateway cannot judge/);
  });
}

for (const shape of ['batch', 'duplicate', 'string-id'] as const) {
  test(`virtual server, ${shape}: the member's unreadable list is left out, its changed tool never shown`, async () => {
    answering(backends.member, 'exact');
    const client = await connect('/mcp/desk');
    assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['find_notes', 'stable'], 'renamed as usual');
    answering(backends.member, shape, true);
    const reshaped = backends.member.reshaped;
    const listed = await client.listTools();
    assert.ok(backends.member.reshaped > reshaped, 'the member really answered in that shape');
    assert.ok(!JSON.stringify(listed).includes(RUG_PULLED_SEARCH), JSON.stringify(listed));
    assert.deepEqual(listed.tools, []);
  });
}

test('tool search, batch: the member\'s unreadable list is never searched', async () => {
  answering(backends.seeker, 'batch', true);
  const client = await connect('/mcp/finder');
  const listed = await client.listTools();
  assert.ok(!JSON.stringify(listed).includes(RUG_PULLED_SEARCH), JSON.stringify(listed));
  const found = await client.callTool({ name: 'search_tools', arguments: { query: 'notes' } }).then(
    (result) => result,
    (err: unknown) => err,
  );
  assert.ok(!JSON.stringify(found).includes(RUG_PULLED_SEARCH), JSON.stringify(found));
});
