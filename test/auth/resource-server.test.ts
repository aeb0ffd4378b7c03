/**
 * The gateway as a strict OAuth resource server (issue 19 defects; RFC 9728 §3.3, RFC 8707,
 * MCP 2025-11-25 "Authorization"), against a real OAuth server and a real SDK backend:
 * - a token made out to an endpoint's own resource identifier opens that endpoint, and
 *   not `/mcp` or another backend's;
 * - with the issuer's keys unreachable, a well-formed token gets 503 with `Retry-After`,
 *   never a 401 that would throw the client's token away;
 * - `auth.scopes` is what the metadata and the 401 challenge advertise.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startResumableBackend } from '../helpers/resumable-backend.js';

let idp: OAuthHandle;
let backend: { url: string; stop(): Promise<void> };
let gateway: GatewayHandle;
let keyless: GatewayHandle;

before(async () => {
  [idp, backend] = await Promise.all([startOAuthServer(), startResumableBackend()]);
  const backends = [
    { name: 'everything', url: backend.url },
    { name: 'other', url: backend.url },
  ];
  gateway = await startGateway({ issuer: idp.issuer, backends, overrides: { auth: { issuer: idp.issuer, audience: 'https://gateway.test/mcp', algorithms: ['RS256'], scopes: ['mcp:tools'] } } });
  // The issuer's keys live at an address where nothing listens.
  const nowhere = await freePort();
  keyless = await startGateway({ issuer: idp.issuer, backends, overrides: { auth: { issuer: idp.issuer, audience: 'https://gateway.test/mcp', algorithms: ['RS256'], jwksUri: `http://127.0.0.1:${nowhere}/jwks` } } });
});

after(async () => {
  await Promise.allSettled([gateway?.close(), keyless?.close()]);
  await Promise.allSettled([backend?.stop(), idp?.stop()]);
});

async function initialize(g: GatewayHandle, path: string, token: string): Promise<Response> {
  return fetch(`${g.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
}

test('the metadata of /mcp/{backend} names that endpoint as its resource (RFC 9728 §3.3)', async () => {
  for (const [path, resource] of [
    ['/mcp/everything', `${gateway.url}/mcp/everything`],
    ['/mcp', `${gateway.url}/mcp`],
  ]) {
    const doc = (await (await fetch(`${gateway.url}/.well-known/oauth-protected-resource${path}`)).json()) as { resource: string; scopes_supported: string[] };
    assert.equal(doc.resource, resource);
    assert.deepEqual(doc.scopes_supported, ['mcp:tools'], 'auth.scopes is advertised');
  }
});

test('a token for an endpoint itself opens it, and not /mcp or another backend', async () => {
  const token = await idp.token({ sub: 'ada', aud: `${gateway.url}/mcp/everything` });
  const own = await initialize(gateway, '/mcp/everything', token);
  assert.equal(own.status, 200);
  await own.body?.cancel();
  for (const path of ['/mcp', '/mcp/other']) {
    const refused = await initialize(gateway, path, token);
    assert.equal(refused.status, 401, path);
    const challenge = refused.headers.get('www-authenticate') ?? '';
    assert.match(challenge, /error="invalid_token"/, path);
    assert.match(challenge, /scope="mcp:tools"/, `${path}: the challenge advertises auth.scopes`);
    await refused.body?.cancel();
  }
  // The configured audience still opens every endpoint.
  const general = await idp.token({ sub: 'ada', aud: 'https://gateway.test/mcp' });
  for (const path of ['/mcp', '/mcp/other']) {
    const res = await initialize(gateway, path, general);
    assert.equal(res.status, 200, path);
    await res.body?.cancel();
  }
});

test('no token: the challenge names the scopes to ask for', async () => {
  const res = await fetch(`${gateway.url}/mcp/everything`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate') ?? '', /scope="mcp:tools"/);
  await res.body?.cancel();
});

test("the issuer's keys unreachable: 503 with Retry-After, not a 401 that discards the client's token", async () => {
  const token = await idp.token({ sub: 'ada', aud: 'https://gateway.test/mcp' });
  const res = await initialize(keyless, '/mcp/everything', token);
  assert.equal(res.status, 503);
  assert.equal(res.headers.get('retry-after'), '5');
  assert.equal(res.headers.get('www-authenticate'), null);
  assert.equal(((await res.json()) as { error: string }).error, 'temporarily_unavailable');
});
