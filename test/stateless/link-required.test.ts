/**
 * URL-mode linking in the MCP 2026-07-28 era on the wire (issue 15; src/stateless/
 * link-required.ts, request-state.ts): a backend that refuses everything without the user's own
 * provider token (the strict protected backend, 2025-era, so the bridge is crossed too), a real
 * Redis, real OAuth servers. The journey through a browser is the 2025 journey's
 * (strict-backend-journey.e2e.test.ts); here the link is made by putting the provider's token
 * into the gateway's vault, sealed as the callback would, so every answer can be read raw:
 * `input_required` with one URL-mode elicitation and a sealed state; a tampered state, another
 * user's state or another request's → -32602 with the id; a decline → an isError result; the
 * retry after the link → the backend, with the user's own provider token.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { userKeyOf } from '../../src/auth/principal.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';
import { openSharedVault, type SharedVault } from '../helpers/vault.js';

const TOKEN_KEY = 'link-2026-token-key-0123456789abcdef0123456789';
const META = (capabilities: Record<string, unknown>) => ({ 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': capabilities });
const URL_MODE = { elicitation: { url: {} } };

let redis: RedisHandle;
let idp: OAuthHandle;
let provider: OAuthHandle;
let backend: ProtectedBackend;
let gateway: GatewayHandle;
let vault: SharedVault;

before(async () => {
  [redis, idp, provider] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer()]);
  backend = await startProtectedBackend(provider.issuer);
  const port = await freePort();
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    redisUrl: redis.url,
    backends: [{ name: 'protected', url: backend.url, upstreamAuth: { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', clientSecret: 'acme-client-secret', scopes: ['repo'] } }],
    overrides: { auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } }, secrets: { cookieKey: 'link-2026-cookie-key-0123456789abcdef01234567', tokenKey: TOKEN_KEY } },
  });
  vault = openSharedVault(redis.url, gateway.config.redis!.keyPrefix, TOKEN_KEY);
});

after(async () => {
  vault?.close();
  await gateway?.close();
  await Promise.allSettled([backend?.stop(), provider?.stop(), idp?.stop(), redis?.stop()]);
});

interface Answer {
  status: number;
  body: { id?: unknown; result?: Record<string, unknown>; error?: { code: number; message: string } };
}

async function call(token: string, id: number, params: Record<string, unknown>, method = 'tools/call'): Promise<Answer> {
  const headers = statelessHeaders(token, method, typeof params.name === 'string' ? params.name : undefined);
  const res = await fetch(gateway.endpoint('protected'), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) });
  const text = await res.text();
  const data = res.headers.get('content-type')?.startsWith('text/event-stream') ? text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).at(-1)! : text;
  return { status: res.status, body: JSON.parse(data) as Answer['body'] };
}

async function userToken(sub: string): Promise<string> {
  return idp.token({ sub, aud: gateway.audience });
}

describe('linking an account in the 2026-07-28 era', () => {
  test('an unlinked call answers input_required: one URL-mode elicitation to the connect page, a sealed state', async () => {
    const answer = await call(await userToken('ada'), 1, { name: 'whoami', arguments: {}, _meta: META(URL_MODE) });
    assert.equal(answer.status, 200);
    assert.equal(answer.body.id, 1);
    const result = answer.body.result!;
    assert.equal(result.resultType, 'input_required');
    const requests = result.inputRequests as Record<string, { method: string; params: { mode: string; url: string; message: string } }>;
    assert.deepEqual(Object.keys(requests), ['io.switchboard/link']);
    const link = requests['io.switchboard/link']!;
    assert.equal(link.method, 'elicitation/create');
    assert.equal(link.params.mode, 'url');
    assert.match(link.params.url, new RegExp(`^${gateway.url}/connect\\?elicitationId=`));
    assert.match(link.params.message, /acme/);
    assert.match(String(result.requestState), /^sb1\./);
    assert.deepEqual(await backend.seenAuthorizations().then((seen) => seen.length), 0, 'nothing reached the backend');
  });

  test('a tampered state, another user\'s state and another request\'s state are refused with -32602 and the id', async () => {
    const ada = await userToken('ada');
    const first = await call(ada, 2, { name: 'whoami', arguments: {}, _meta: META(URL_MODE) });
    const state = String(first.body.result!.requestState);
    const accept = { 'io.switchboard/link': { action: 'accept' } };
    const tampered = state.slice(0, -3) + (state.at(-3) === 'A' ? 'B' : 'A') + state.slice(-2);
    for (const [who, token, params] of [
      ['tampered', ada, { name: 'whoami', arguments: {}, inputResponses: accept, requestState: tampered }],
      ['another user', await userToken('mallory'), { name: 'whoami', arguments: {}, inputResponses: accept, requestState: state }],
      ['another request', ada, { name: 'whoami', arguments: { other: true }, inputResponses: accept, requestState: state }],
    ] as const) {
      const answer = await call(token, 3, { ...params, _meta: META(URL_MODE) });
      assert.equal(answer.body.id, 3, who);
      assert.equal(answer.body.error?.code, -32602, `${who}: ${JSON.stringify(answer.body)}`);
    }
  });

  test('declining the link answers an isError result naming the provider; retrying before the link asks again', async () => {
    const ada = await userToken('ada');
    const first = await call(ada, 4, { name: 'whoami', arguments: {}, _meta: META(URL_MODE) });
    const state = String(first.body.result!.requestState);
    const declined = await call(ada, 5, { name: 'whoami', arguments: {}, inputResponses: { 'io.switchboard/link': { action: 'decline' } }, requestState: state, _meta: META(URL_MODE) });
    assert.equal(declined.body.result?.isError, true, JSON.stringify(declined.body));
    assert.match(JSON.stringify(declined.body.result?.content), /acme/);
    const again = await call(ada, 6, { name: 'whoami', arguments: {}, inputResponses: { 'io.switchboard/link': { action: 'accept' } }, requestState: state, _meta: META(URL_MODE) });
    assert.equal(again.body.result?.resultType, 'input_required', JSON.stringify(again.body));
  });

  test('after the link the retry reaches the backend with the user\'s own provider token', async () => {
    const grace = await userToken('grace');
    const first = await call(grace, 7, { name: 'whoami', arguments: {}, _meta: META(URL_MODE) });
    const state = String(first.body.result!.requestState);
    const providerToken = await provider.token({ sub: 'grace-at-acme' });
    await vault.vault.put(userKeyOf(idp.issuer, 'grace'), 'acme', { accessToken: providerToken, tokenType: 'Bearer' });
    const done = await call(grace, 8, { name: 'whoami', arguments: {}, inputResponses: { 'io.switchboard/link': { action: 'accept' } }, requestState: state, _meta: META(URL_MODE) });
    assert.equal(done.body.result?.resultType, 'complete', JSON.stringify(done.body));
    assert.match(JSON.stringify(done.body.result?.content), /third-party user: grace-at-acme/);
    assert.ok((await backend.seenAuthorizations()).includes(`Bearer ${providerToken}`));
  });

  test('a linked token the backend refuses, initialize included, is forgotten and the link asked for again', async () => {
    // The bridge opens its own session with the token: the strict backend answers that initialize 401.
    const eve = await userToken('eve');
    await vault.store.ready();
    await vault.vault.put(userKeyOf(idp.issuer, 'eve'), 'acme', { accessToken: 'not-a-token-acme-issued', tokenType: 'Bearer' });
    const answer = await call(eve, 9, { name: 'whoami', arguments: {}, _meta: META(URL_MODE) });
    assert.equal(answer.body.result?.resultType, 'input_required', JSON.stringify(answer.body));
    assert.equal(await vault.vault.get(userKeyOf(idp.issuer, 'eve'), 'acme'), undefined, 'the refused token was forgotten');
  });

  test('a client without elicitation.url gets the link as text; the unlinked lists come from the catalog, private', async () => {
    const tom = await userToken('tom');
    const answer = await call(tom, 9, { name: 'whoami', arguments: {}, _meta: META({ elicitation: {} }) });
    assert.equal(answer.body.result?.isError, true, JSON.stringify(answer.body));
    assert.match(JSON.stringify(answer.body.result?.content), /\/connect\?elicitationId=/);
    const list = await call(tom, 10, { _meta: META({}) }, 'tools/list');
    assert.equal(list.body.result?.resultType, 'complete', JSON.stringify(list.body));
    assert.equal(list.body.result?.cacheScope, 'private');
    assert.ok(Array.isArray(list.body.result?.tools));
  });

  test('server/discover before the link answers what is known without the token, the link left to a call (issue 42 cause 11)', async () => {
    const zoe = await userToken('zoe');
    const discover = await call(zoe, 11, { _meta: META(URL_MODE) }, 'server/discover');
    assert.equal(discover.status, 200);
    assert.equal(discover.body.id, 11);
    assert.equal(discover.body.error, undefined, `discovery must not need the account: ${JSON.stringify(discover.body)}`);
    const result = discover.body.result!;
    assert.equal(result.resultType, 'complete');
    assert.deepEqual(result.supportedVersions, ['2026-07-28']);
    assert.ok((result.capabilities as Record<string, unknown>).tools, 'tools are offered: the connect tool, until the link');
    assert.equal(result.cacheScope, 'private');
    assert.match(String(result.instructions), /acme/, 'the instructions say the account is needed');
    const list = await call(zoe, 12, { _meta: META(URL_MODE) }, 'tools/list');
    const names = (list.body.result?.tools as { name: string }[]).map((t) => t.name);
    assert.ok(names.length > 0, JSON.stringify(list.body));
  });
});
