/**
 * What the account-linking side keeps of `upstreamAuth` follows a config reload (issue 32 §1,
 * docs/operations-reload.md), in process:
 *
 * - a gateway with no `secrets` (its browser flows make their own keys) still sees the
 *   reloaded backends: its client ID metadata document names the callback of a provider a
 *   reload added and forgets one a reload removed;
 * - discovered endpoints are reused while a backend's settings stay the same, and found
 *   afresh when a reload changed its `upstreamAuth` (here: its scopes), through the real
 *   endpoint resolver against the node:http authorization server fixture.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { replaceConfig } from '../../src/config/live-config.js';
import { parseConfig } from '../../src/config/load.js';
import type { Config, ConfigInput } from '../../src/config/schema.js';
import { createEndpointResolver } from '../../src/providers/provider-endpoints.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { startSecretPostServer, type SecretPostServer } from '../fixtures/secret-post-server.js';

const PUBLIC_URL = 'https://mcp.example.com';

let server: SecretPostServer;
before(async () => {
  server = await startSecretPostServer();
});
after(async () => {
  await server?.close();
});

/** A config with no `secrets`, whose backends are `remote` plus `extra`. */
function configWith(extra: ConfigInput['backends'], publicUrl = PUBLIC_URL): Config {
  return parseConfig({
    publicUrl,
    log: { level: 'silent' },
    auth: { issuer: 'http://127.0.0.1:1', audience: `${publicUrl}/mcp`, login: { clientId: 'switchboard-web' } },
    backends: [{ name: 'remote', url: 'https://remote.example/mcp', upstreamAuth: { provider: 'remote', discover: true } }, ...extra],
  } as ConfigInput);
}

test('without secrets, a reload that adds or removes a discovering provider changes the client ID metadata document', async () => {
  const app = await buildApp(configWith([]), { store: new MemoryStore() });
  const redirectUris = async () => {
    const res = await app.inject({ method: 'GET', url: '/oauth/client-metadata.json', headers: { host: 'mcp.example.com' } });
    assert.equal(res.statusCode, 200);
    return (res.json() as { redirect_uris: string[] }).redirect_uris;
  };
  try {
    assert.deepEqual(await redirectUris(), [`${PUBLIC_URL}/oauth/callback/remote`]);
    assert.equal(app.applyConfig(configWith([{ name: 'added', url: 'https://added.example/mcp', upstreamAuth: { provider: 'added', discover: true } }])), 'applied');
    assert.deepEqual(await redirectUris(), [`${PUBLIC_URL}/oauth/callback/added`, `${PUBLIC_URL}/oauth/callback/remote`]);
    assert.equal(app.applyConfig(configWith([])), 'applied');
    assert.deepEqual(await redirectUris(), [`${PUBLIC_URL}/oauth/callback/remote`]);
  } finally {
    await app.close();
  }
});

test('discovered endpoints are reused for the same settings and found afresh when a reload changes upstreamAuth', async () => {
  const withScopes = (scopes?: string[]) =>
    parseConfig({
      publicUrl: 'http://127.0.0.1:1',
      auth: { issuer: 'http://127.0.0.1:1', audience: 'http://127.0.0.1:1/mcp', login: { clientId: 'switchboard-web' } },
      backends: [{ name: 'remote', url: server.mcpUrl, upstreamAuth: { provider: 'remote', discover: true, ...(scopes ? { scopes } : {}) } }],
    } as ConfigInput);
  const config = withScopes();
  const resolve = createEndpointResolver(config, new MemoryStore(), createTokenCipher('upstream-auth-reload-key'));
  const first = resolve(config.backends[0]!);
  assert.equal(resolve(config.backends[0]!), first, 'the same settings share one discovery');
  // The backend's 401 challenge names `files:read` (secret-post-server.ts).
  assert.deepEqual((await first).scopes, ['files:read']);

  replaceConfig(config, withScopes(['files:read', 'files:write']));
  const second = await resolve(config.backends[0]!);
  assert.deepEqual(second.scopes, ['files:read', 'files:write']);
  assert.equal(second.authorizationUrl, (await first).authorizationUrl);
});
