/**
 * When a replica discovers a backend's authorization server again (issue 42 §6, SEP-2352;
 * src/providers/provider-endpoints.ts `current` and `moved`), with the real discovery against
 * test/fixtures/discovered-provider.ts and test/fixtures/moving-backend.ts:
 * - a link naming another issuer than this replica's discovery is checked at once, however
 *   recent that discovery is: this replica may be the stale one (CI, session 31: a replica
 *   that had discovered the old server half a second earlier sent the browser there);
 * - a burst of links naming the same stale issuer makes one discovery, not one each;
 * - a refused token always reads the backend's metadata again.
 * Discoveries are counted as the backend's protected resource metadata documents served.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { createEndpointResolver } from '../../src/providers/provider-endpoints.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { startDiscoveredProvider, type DiscoveredProvider } from '../fixtures/discovered-provider.js';
import { startMovingBackend, type MovingBackend } from '../fixtures/moving-backend.js';

const PUBLIC_URL = 'http://127.0.0.1:1';
const METADATA = '/.well-known/oauth-protected-resource/mcp';

let servers: DiscoveredProvider;
let backend: MovingBackend;

before(async () => {
  servers = await startDiscoveredProvider({ old: { scopes: ['files:read'], issParameter: true }, new: { scopes: ['files:read'], issParameter: true } });
});
after(async () => {
  await Promise.allSettled([servers?.close(), backend?.close()]);
});

/** A replica's resolver for a backend that starts at `old`; `discoveries()` counts metadata reads. */
async function replica() {
  await backend?.close();
  backend = await startMovingBackend(servers, 'old', ['files:read'], ['files:read']);
  const config = parseConfig({
    publicUrl: PUBLIC_URL,
    auth: { issuer: 'http://127.0.0.1:1', audience: `${PUBLIC_URL}/mcp`, login: { clientId: 'switchboard-web' } },
    backends: [{ name: 'moving', url: backend.mcpUrl, upstreamAuth: { provider: 'moving', discover: true } }],
  } as ConfigInput);
  const resolver = createEndpointResolver(config, new MemoryStore(), createTokenCipher('endpoint-resolver-moves-key'));
  const moving = config.backends[0]!;
  const discoveries = () => backend.fixture.hits(METADATA).length;
  return { resolver, moving, discoveries };
}

test('a link naming the new server is followed at once, though this replica discovered the old one just now', async () => {
  const { resolver, moving, discoveries } = await replica();
  assert.equal((await resolver(moving)).issuer, servers.issuer('old'));
  backend.moveTo('new');
  // Another replica noticed the move and made a link naming the new server; this one's discovery is milliseconds old.
  const found = await resolver.current(moving, servers.issuer('new'));
  assert.equal(found.issuer, servers.issuer('new'));
  assert.equal(resolver.knownIssuer(moving), servers.issuer('new'));
  assert.equal(discoveries(), 2);
});

test('links naming the old server after the move: the first is checked, the burst after it is not', async () => {
  const { resolver, moving, discoveries } = await replica();
  assert.equal((await resolver(moving)).issuer, servers.issuer('old'));
  backend.moveTo('new');
  assert.equal((await resolver.current(moving, servers.issuer('new'))).issuer, servers.issuer('new'));
  const before = discoveries();
  // Stale links (made before the move) arrive together: one discovery answers them all.
  const answers = await Promise.all(Array.from({ length: 5 }, () => resolver.current(moving, servers.issuer('old'))));
  assert.deepEqual(
    answers.map((a) => a.issuer),
    Array(5).fill(servers.issuer('new')),
  );
  assert.equal(await resolver.current(moving, servers.issuer('old')).then((a) => a.issuer), servers.issuer('new'));
  assert.equal(discoveries(), before + 1, 'one discovery for six stale links');
  // A link naming the issuer this replica holds costs nothing.
  await resolver.current(moving, servers.issuer('new'));
  assert.equal(discoveries(), before + 1);
});

test('a refused token reads the metadata again, however recent the discovery', async () => {
  const { resolver, moving, discoveries } = await replica();
  assert.equal((await resolver(moving)).issuer, servers.issuer('old'));
  backend.moveTo('new');
  const before = discoveries();
  assert.equal(await resolver.moved(moving, undefined, servers.issuer('old')), servers.issuer('new'));
  assert.ok(discoveries() > before);
  assert.equal(resolver.knownIssuer(moving), servers.issuer('new'));
});
