/**
 * The first request to a backend of unknown era (issue 42 cause 1). A 2025-11-25 user (the
 * official v1 SDK client) connects through a real gateway to backends the gateway has never
 * seen. The gateway asks as a 2026-07-28 client does (basic/versioning §Backward
 * Compatibility): `server/discover` first, with the 2026 headers and `_meta`; a 2026-07-28
 * backend (the v2 SDK server with `legacy: 'reject'`) then never gets the plain `initialize`
 * it must refuse, and every POST it gets carries MCP-Protocol-Version; a 2025-11-25 backend
 * gets the user's `initialize` after one probe, and later users' without one.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startEraBackend, type EraBackend } from '../fixtures/era-backends.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

let oauth: OAuthHandle;
let modern: EraBackend;
let legacy: EraBackend;
let gateway: GatewayHandle;

before(async () => {
  [oauth, modern, legacy] = await Promise.all([startOAuthServer(), startEraBackend('modern'), startEraBackend('legacy')]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'modern', url: modern.url }, { name: 'legacy', url: legacy.url }] });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([modern?.close(), legacy?.close(), oauth?.stop()]);
});

/** A 2025-11-25 user on /mcp/{backend}: connects, calls `era`, and says what it read. */
async function callThrough(backend: string, sub: string): Promise<string> {
  const token = await oauth.token({ sub, aud: gateway.audience });
  const client = new Client({ name: 'first-request', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway.endpoint(backend)), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  try {
    const result = await client.callTool({ name: 'era', arguments: {} });
    return (result.content as Array<{ text?: string }>).map((c) => c.text).join(' ');
  } finally {
    await client.close();
  }
}

test('a 2026-07-28 backend never gets the initialize it must refuse; every POST carries MCP-Protocol-Version', async () => {
  assert.equal(await callThrough('modern', 'first-modern'), 'served as modern');
  const posts = modern.seen.filter((r) => r.httpMethod === 'POST');
  assert.deepEqual(posts.filter((r) => r.rpcMethod === 'initialize').length, 0, `the backend got: ${posts.map((r) => r.rpcMethod).join(', ')}`);
  assert.deepEqual(posts.filter((r) => r.headers['mcp-protocol-version'] !== '2026-07-28').map((r) => r.rpcMethod), []);
  assert.equal(posts[0]?.rpcMethod, 'server/discover', 'asked first as a 2026 client asks');
  assert.equal(modern.discoverCount(), 1, 'the era is remembered: one discover');
});

test('a 2025-11-25 backend gets the user\'s initialize after one probe; a second user finds the era known', async () => {
  assert.equal(await callThrough('legacy', 'first-legacy-a'), 'served as legacy');
  assert.equal(await callThrough('legacy', 'first-legacy-b'), 'served as legacy');
  assert.equal(legacy.discoverCount(), 1);
  assert.equal(legacy.seen.filter((r) => r.rpcMethod === 'initialize').length, 2);
});
