/**
 * Linking an account at a backend that refuses everything without the user's token, as
 * hosted MCP servers do (issue 12; SPEC §8 "Linking"), end to end with real parts: two
 * gateway replicas on one real Redis with every MCP request alternating between them, two
 * real OAuth servers (the MCP authorization server and the third-party provider), the strict
 * protected backend, the official SDK client and Chromium.
 *
 * Journey on `/mcp/{backend}` and on `/mcp`: connect → list (the gateway's `connect` tool
 * while nothing is known) → call → -32042 → sign in → consent → provider → complete →
 * `tools/list_changed` → the real list → the retry reaches the backend with the user's own
 * third-party identity. A second user who has not linked sees none of the first user's lists
 * (issue 28: the backend's lists are per user), only the gateway's `connect` tool, and is
 * asked to link on a call.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitationCompleteNotificationSchema, ToolListChangedNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { eventually, linkInBrowser, linkRequired } from '../helpers/linking-journey.js';
import { allToolNames } from '../helpers/pages.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let provider: OAuthHandle;
let backend: ProtectedBackend;
let browser: BrowserHandle;
let replicas: ReplicaSet;

before(async () => {
  [redis, idp, provider, browser] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer(), launchBrowser()]);
  backend = await startProtectedBackend(provider.issuer);
  const upstreamAuth = { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['repo'] };
  replicas = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    // Two names for one server, each a member of /mcp.
    backends: [
      { name: 'protected', url: backend.url, upstreamAuth },
      { name: 'crm', url: backend.url, upstreamAuth },
    ],
    auth: { login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    extra: { secrets: { cookieKey: 'journey-cookie-key-0123456789abcdef0123456789', tokenKey: 'journey-token-key-0123456789abcdef012345678' } },
  });
});

after(async () => {
  await browser?.close();
  await replicas?.stop();
  await Promise.allSettled([backend?.stop(), provider?.stop(), idp?.stop(), redis?.stop()]);
});

interface Watched {
  client: Client;
  completed: string[];
  toolListChanges: number;
}

/** An SDK client declaring URL-mode elicitation, its requests spread over both replicas. */
async function connect(path: string, sub: string): Promise<Watched> {
  const token = await idp.token({ sub, aud: replicas.audience });
  const client = new Client({ name: 'journey-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} }, sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text: 'hi' } }));
  const watched: Watched = { client, completed: [], toolListChanges: 0 };
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void watched.completed.push(n.params.elicitationId));
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void watched.toolListChanges++);
  const url = new URL(path, replicas.replicas[0]!.url);
  await client.connect(new StreamableHTTPClientTransport(url, { fetch: replicas.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return watched;
}

/** Every tool name over all pages (on /mcp each backend is a page of its own). */
async function toolNames(client: Client): Promise<string[]> {
  return (await allToolNames(client)).items.sort();
}

test('/mcp/{backend}: connect and list before linking, link through the browser, then the real tools with the user\'s own identity', { timeout: 120_000 }, async () => {
  const alice = await connect('/mcp/protected', 'alice');
  try {
    // Connecting needed no account; nothing is known of the backend yet: the gateway's tool.
    assert.deepEqual(await toolNames(alice.client), ['connect']);
    assert.equal(await backend.sessionsOpened(), 0);
    const link = await linkRequired(alice.client, 'connect');

    assert.match(await linkInBrowser(browser, link.url, 'acme', [idp.subjectCookie('alice'), provider.subjectCookie('alice-at-acme')]), /acme/);
    await eventually('notifications/elicitation/complete', () => alice.completed.includes(link.elicitationId));
    await eventually('notifications/tools/list_changed', () => alice.toolListChanges > 0);

    // The re-list opens the backend session behind the client's back, on whichever replica.
    assert.deepEqual(await toolNames(alice.client), ['ask', 'whoami']);
    const whoami = (await alice.client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;
    assert.match(JSON.stringify(whoami.content), /third-party user: alice-at-acme/);
    const again = (await alice.client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;
    assert.match(JSON.stringify(again.content), /alice-at-acme/);
    assert.deepEqual((await alice.client.listPrompts()).prompts.map((p) => p.name), ['greeting']);
    // The stream the client opened while unlinked now carries the backend's own requests.
    const asked = (await alice.client.callTool({ name: 'ask', arguments: {} }, undefined, { timeout: 10_000 })) as CallToolResult;
    assert.match(JSON.stringify(asked.content), /client said: hi/);
    assert.equal(await backend.sessionsOpened(), 1, 'one backend session for one client session, whichever replica opened it');
  } finally {
    await alice.client.close();
  }

  // Bob has not linked: nothing Alice's token brought is his (issue 28), and a call asks for the link.
  const bob = await connect('/mcp/protected', 'bob');
  try {
    assert.equal(bob.client.getServerVersion()?.name, 'protected', 'the gateway speaks for the backend');
    assert.doesNotMatch(bob.client.getInstructions() ?? '', /alice/);
    assert.deepEqual(await toolNames(bob.client), ['connect']);
    assert.deepEqual((await bob.client.listPrompts()).prompts, []);
    assert.deepEqual((await bob.client.listResources()).resources, []);
    await linkRequired(bob.client, 'whoami');
  } finally {
    await bob.client.close();
  }
  // The client's own tokens never reached the backend: it saw only acme's.
  for (const header of await backend.seenAuthorizations()) assert.doesNotMatch(header, new RegExp(idp.issuer.replace(/[.:/]/g, '.')));
});

test('/mcp: the backend stays a member waiting for the link; {backend}__connect leads to it, then it joins for real', { timeout: 120_000 }, async () => {
  const carol = await connect('/mcp', 'carol');
  try {
    const before = await toolNames(carol.client);
    // Neither member shows Carol what Alice's token brought: the gateway's tool for each.
    assert.deepEqual(before, ['crm__connect', 'protected__connect']);
    const link = await linkRequired(carol.client, 'crm__connect');
    await linkRequired(carol.client, 'protected__connect');

    assert.match(await linkInBrowser(browser, link.url, 'acme', [idp.subjectCookie('carol'), provider.subjectCookie('carol-at-acme')]), /acme/);
    await eventually('notifications/elicitation/complete', () => carol.completed.includes(link.elicitationId));
    await eventually('notifications/tools/list_changed', () => carol.toolListChanges > 0);

    assert.deepEqual(await toolNames(carol.client), ['crm__ask', 'crm__whoami', 'protected__ask', 'protected__whoami']);
    for (const name of ['crm__whoami', 'protected__whoami']) {
      const result = (await carol.client.callTool({ name, arguments: {} })) as CallToolResult;
      assert.match(JSON.stringify(result.content), /third-party user: carol-at-acme/, name);
    }
  } finally {
    await carol.client.close();
  }
});
