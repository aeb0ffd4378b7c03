/**
 * No user's lists for another (issue 28 §1; SPEC §8 "Linking"): what the gateway answers for a
 * backend whose account a user has not linked comes from that user's own token, from the
 * backend's answer to no token at all, from the operator's config, or from the gateway's own
 * `connect` tool — never from another user's token, unless the operator opted in to share
 * tools and prompts (`upstreamAuth.shareCatalog`), and never resources, templates or
 * instructions.
 *
 * Real parts: two gateway replicas on one Redis with requests alternating between them, two
 * real OAuth servers, the strict protected backend (401 without a token; its instructions,
 * resources, templates, tool and prompt descriptions name the user whose token opened the
 * session; the caller is read from each request's token). Alice's link is made by sealing
 * the provider's token into the vault as the callback would; the browser journey is
 * strict-backend-journey.e2e.test.ts's.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { withDeadline } from '../helpers/deadline.js';
import { allPages } from '../helpers/pages.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';
import { openSharedVault, type SharedVault } from '../helpers/vault.js';

const TOKEN_KEY = 'isolation-token-key-0123456789abcdef0123456789';
/** What Alice's third-party identity is called; nothing another user is shown may contain it. */
const ALICE_AT_ACME = 'acme-alice';
const LISTS = ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list'] as const;

let redis: RedisHandle;
let idp: OAuthHandle;
let provider: OAuthHandle;
let backend: ProtectedBackend;
/** The same server as many let anyone list: only tools/call needs the token. */
let openBackend: ProtectedBackend;
let replicas: ReplicaSet;
let vault: SharedVault;

const STATIC_TOOL = { name: 'search_mail', description: 'Searches the signed-in user\'s mail', inputSchema: { type: 'object', properties: { query: { type: 'string' } } } };
const STATIC_PROMPT = { name: 'summarize_inbox', description: 'Summarizes the inbox' };

before(async () => {
  [redis, idp, provider] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer()]);
  [backend, openBackend] = await Promise.all([startProtectedBackend(provider.issuer), startProtectedBackend(provider.issuer, { openListing: true })]);
  const upstreamAuth = { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['mail'] };
  replicas = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    // One server under three names: each has a catalog of its own.
    backends: [
      { name: 'mail', url: backend.url, upstreamAuth },
      { name: 'mail-shared', url: backend.url, upstreamAuth: { ...upstreamAuth, shareCatalog: ['tools', 'prompts'] } },
      { name: 'mail-static', url: backend.url, upstreamAuth: { ...upstreamAuth, catalog: { tools: [STATIC_TOOL], prompts: [STATIC_PROMPT] } } },
      { name: 'open-mail', url: openBackend.url, upstreamAuth },
    ],
    auth: { login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    extra: { secrets: { cookieKey: 'isolation-cookie-key-0123456789abcdef0123456', tokenKey: TOKEN_KEY } },
  });
  vault = openSharedVault(redis.url, keyPrefix(), TOKEN_KEY);
  await vault.store.ready();
  await vault.vault.put(userKeyOf(idp.issuer, 'alice'), 'acme', { accessToken: await provider.token({ sub: ALICE_AT_ACME }), tokenType: 'Bearer' });
});

after(async () => {
  vault?.close();
  await replicas?.stop();
  await Promise.allSettled([backend?.stop(), openBackend?.stop(), provider?.stop(), idp?.stop(), redis?.stop()]);
});

/** The replicas' shared key prefix (test/helpers/replicas.ts names it after the first port). */
function keyPrefix(): string {
  return `sbrep-${new URL(replicas.replicas[0]!.url).port}:`;
}

interface Seen {
  instructions: string;
  serverName: string | undefined;
  lists: Record<(typeof LISTS)[number], unknown[]>;
}

/** Connects as `sub` to `path` (requests alternate between replicas) and reads every list's first page. */
async function look(path: string, sub: string): Promise<Seen> {
  const token = await idp.token({ sub, aud: replicas.audience });
  const client = new Client({ name: 'isolation-client', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(new URL(path, replicas.replicas[0]!.url), { fetch: replicas.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 15_000, `connect ${sub}`);
  try {
    return {
      instructions: client.getInstructions() ?? '',
      serverName: client.getServerVersion()?.name,
      lists: {
        'tools/list': await every(async (cursor) => pageOf(await client.listTools({ cursor }), 'tools')),
        'prompts/list': await every(async (cursor) => pageOf(await client.listPrompts({ cursor }), 'prompts')),
        'resources/list': await every(async (cursor) => pageOf(await client.listResources({ cursor }), 'resources')),
        'resources/templates/list': await every(async (cursor) => pageOf(await client.listResourceTemplates({ cursor }), 'resourceTemplates')),
      },
    };
  } finally {
    await client.close();
  }
}

/** Every item of a list; none where the server has no such list (-32601, as a backend without resources answers). */
async function every(page: (cursor?: string) => Promise<{ items: unknown[]; nextCursor?: string }>): Promise<unknown[]> {
  try {
    return (await allPages(page)).items;
  } catch (err) {
    if (err instanceof McpError && err.code === -32601) return [];
    throw err;
  }
}

/** One page of a list result, as allPages walks them (on /mcp each backend is a page of its own). */
function pageOf(result: Record<string, unknown>, key: string): { items: unknown[]; nextCursor?: string } {
  return { items: result[key] as unknown[], nextCursor: result.nextCursor as string | undefined };
}

/** A MCP 2026-07-28 request of `sub` (no session) to the second replica; the answer's text. */
async function stateless(sub: string, backendName: string, method: string): Promise<string> {
  const token = await idp.token({ sub, aud: replicas.audience });
  const res = await fetch(replicas.endpoint(1, backendName), {
    method: 'POST',
    headers: statelessHeaders(token, method),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return text;
}

const names = (items: unknown[]) => items.map((item) => (item as { name: string }).name).sort();

describe('an unlinked user meets a backend another user has listed', () => {
  before(async () => {
    // Alice is linked: her lists come from her own token, on each name of the server and on /mcp.
    for (const path of ['/mcp/mail', '/mcp/mail-shared', '/mcp/mail-static']) {
      const alice = await look(path, 'alice');
      assert.match(alice.instructions, new RegExp(ALICE_AT_ACME), path);
      assert.deepEqual(alice.lists['resources/list'].map((r) => (r as { uri: string }).uri), [`acme://mail/${ALICE_AT_ACME}/inbox`], path);
      assert.deepEqual(names(alice.lists['tools/list']), ['ask', 'whoami'], path);
    }
    const aliceEverywhere = await look('/mcp', 'alice');
    assert.ok(aliceEverywhere.lists['resources/list'].length >= 3, 'Alice lists her mailbox through /mcp too');
  });

  test('without the opt-in, Dave sees nothing of Alice: the connect tool, empty lists, the gateway\'s own instructions', async () => {
    const dave = await look('/mcp/mail', 'dave');
    assert.doesNotMatch(JSON.stringify(dave), new RegExp(ALICE_AT_ACME));
    assert.deepEqual(names(dave.lists['tools/list']), ['connect']);
    assert.deepEqual(dave.lists['prompts/list'], []);
    assert.deepEqual(dave.lists['resources/list'], []);
    assert.deepEqual(dave.lists['resources/templates/list'], []);
    assert.match(dave.instructions, /needs the user's acme account/);
    assert.equal(dave.serverName, 'mail', 'serverInfo seen with Alice\'s token is not repeated');
    assert.equal(await backend.foreignSessionUses(), 0, 'no backend session of Alice\'s was used for another user');
  });

  test('with shareCatalog [tools, prompts], Dave sees the tools and prompts Alice was shown, never her resources, templates or instructions', async () => {
    const dave = await look('/mcp/mail-shared', 'dave');
    assert.deepEqual(names(dave.lists['tools/list']), ['ask', 'whoami']);
    assert.deepEqual(names(dave.lists['prompts/list']), ['greeting']);
    assert.deepEqual(dave.lists['resources/list'], []);
    assert.deepEqual(dave.lists['resources/templates/list'], []);
    assert.doesNotMatch(dave.instructions, new RegExp(ALICE_AT_ACME));
  });

  test('a static catalog in the config is what an unlinked user sees, whatever others were shown', async () => {
    const dave = await look('/mcp/mail-static', 'dave');
    assert.doesNotMatch(JSON.stringify(dave), new RegExp(ALICE_AT_ACME));
    assert.deepEqual(dave.lists['tools/list'], [STATIC_TOOL]);
    assert.deepEqual(dave.lists['prompts/list'], [STATIC_PROMPT]);
    assert.deepEqual(dave.lists['resources/list'], []);
  });

  test('on /mcp, the members Dave has not linked show nothing of Alice\'s beyond the opted-in tools and prompts', async () => {
    const dave = await look('/mcp', 'dave');
    const text = JSON.stringify({ instructions: dave.instructions, resources: dave.lists['resources/list'], templates: dave.lists['resources/templates/list'] });
    assert.doesNotMatch(text, new RegExp(ALICE_AT_ACME));
    // open-mail lets anyone list: Dave's own tokenless lists, real ones.
    assert.deepEqual(names(dave.lists['tools/list']), ['mail-shared__ask', 'mail-shared__whoami', 'mail-static__search_mail', 'mail__connect', 'open-mail__ask', 'open-mail__whoami']);
    assert.deepEqual(names(dave.lists['prompts/list']), ['mail-shared__greeting', 'mail-static__summarize_inbox', 'open-mail__greeting']);
  });

  test('what a backend answers without any token is shown to users who have not linked; what it answered Alice is not', async () => {
    const alice = await look('/mcp/open-mail', 'alice');
    assert.deepEqual(alice.lists['resources/list'].map((r) => (r as { uri: string }).uri), [`acme://mail/${ALICE_AT_ACME}/inbox`]);
    // Frank has not linked: his session and lists reach the backend without a token.
    const frank = await look('/mcp/open-mail', 'frank');
    assert.deepEqual(names(frank.lists['tools/list']), ['ask', 'whoami']);
    assert.doesNotMatch(JSON.stringify(frank), new RegExp(ALICE_AT_ACME));
    // A 2026 client has no session: the gateway answers its lists from the tokenless ones.
    const gina = await stateless('gina', 'open-mail', 'tools/list');
    assert.doesNotMatch(gina, new RegExp(ALICE_AT_ACME));
    assert.deepEqual(names((JSON.parse(gina) as { result: { tools: unknown[] } }).result.tools), ['ask', 'whoami']);
  });

  test('in the 2026-07-28 era too: an unlinked user\'s lists carry nothing of Alice\'s', async () => {
    for (const method of LISTS) {
      const text = await stateless('dave', 'mail', method);
      assert.doesNotMatch(text, new RegExp(ALICE_AT_ACME), method);
      assert.match(text, /"resultType":"complete"/, method);
    }
  });

  test('catalog entries a gateway before the fix stored are not served (a rolling upgrade stops leaking at once)', async () => {
    const client = new Redis(redis.url);
    try {
      const leaked = { resources: [{ uri: `acme://mail/${ALICE_AT_ACME}/inbox`, name: 'inbox', title: `Mailbox of ${ALICE_AT_ACME}` }] };
      await client.set(`${keyPrefix()}v:catalog:mail:resources/list`, JSON.stringify(leaked), 'PX', 60_000);
      await client.set(`${keyPrefix()}v:catalog:mail:initialize`, JSON.stringify({ capabilities: { resources: {} }, instructions: `Mail and files of ${ALICE_AT_ACME}.` }), 'PX', 60_000);
    } finally {
      client.disconnect();
    }
    const erin = await look('/mcp/mail', 'erin');
    assert.doesNotMatch(JSON.stringify(erin), new RegExp(ALICE_AT_ACME));
    assert.deepEqual(erin.lists['resources/list'], []);
  });
});
