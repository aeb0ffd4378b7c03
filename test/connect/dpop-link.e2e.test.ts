/**
 * DPoP (RFC 9449) toward a backend's authorization server and the backend (issue 42 cause 12),
 * end to end with real parts: the gateway on a real Redis, the MCP authorization server for
 * the gateway's own clients (test/fixtures/oauth-server-process.ts), test/fixtures/dpop-server.ts
 * as the backend and its authorization server — strict as RFC 9449 §4.3 reads, requiring
 * nonces at both, binding the access and the refresh token to the proof's key —, the official
 * SDK client and Chromium walking the link.
 *
 * What is checked is what those servers saw: a proof of one key per link at the code exchange,
 * the refresh and every request to the backend (`typ`, public `jwk`, fresh `jti`, `htm`, `htu`
 * without query, `iat`, `ath`), the DPoP scheme, each server's `use_dpop_nonce` answered by one
 * retry with its nonce; and what the gateway refuses (a malformed nonce, a second challenge, a token type it did
 * not ask for) without losing the link. The key is sealed in the vault, never logged.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { dpopKey, generateDpopKey, htuOf, readDpopNonce } from '../../src/backends/dpop.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { linkInBrowser, linkRequired, watchedClient, eventually } from '../helpers/linking-journey.js';
import { captureLogLines, type LogLines } from '../helpers/log-lines.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { openSharedVault, type SharedVault } from '../helpers/vault.js';
import { startDpopServer, type DpopServer } from '../fixtures/dpop-server.js';

const PREFIX = 'dpop:';
const TOKEN_KEY = 'dpop-token-key-0123456789abcdef0123456789abc';
const COOKIE_KEY = 'dpop-cookie-key-0123456789abcdef0123456789ab';

let redis: RedisHandle;
let idp: OAuthHandle;
let browser: BrowserHandle;
let server: DpopServer;
let gateway: GatewayHandle;
let shared: SharedVault;
let logs: LogLines;

before(async () => {
  [redis, idp, browser, server] = await Promise.all([startRedis(), startOAuthServer(), launchBrowser(), startDpopServer()]);
  const port = await freePort();
  logs = captureLogLines();
  gateway = await startGateway({
    issuer: idp.issuer,
    port,
    redisUrl: redis.url,
    backends: [{ name: 'bound', url: server.mcpUrl, upstreamAuth: { provider: 'bound', discover: true } }],
    logStream: logs.stream,
    overrides: {
      redis: { url: redis.url, keyPrefix: PREFIX },
      log: { level: 'debug' },
      secrets: { cookieKey: COOKIE_KEY, tokenKey: TOKEN_KEY },
      auth: { issuer: idp.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256'], login: { clientId: 'switchboard-web', scopes: ['openid'] } },
    },
  });
  shared = openSharedVault(redis.url, PREFIX, TOKEN_KEY);
});

after(async () => {
  await browser?.close();
  await gateway?.close();
  shared?.close();
  await Promise.allSettled([idp?.stop(), redis?.stop(), server?.close()]);
});

test('a proof holds what RFC 9449 §4.2 asks, and a nonce is read strictly', async () => {
  const jwk = await generateDpopKey();
  const key = await dpopKey(jwk);
  const token = 'an-access-token';
  const one = await key.proof({ htm: 'POST', htu: 'https://rs.example/mcp?x=1#frag', accessToken: token, nonce: 'n-1' });
  const two = await key.proof({ htm: 'POST', htu: 'https://rs.example/mcp' });
  const header = decodeProtectedHeader(one);
  assert.equal(header.typ, 'dpop+jwt');
  assert.equal(header.alg, 'ES256');
  assert.deepEqual(Object.keys(header.jwk!).sort(), ['crv', 'kty', 'x', 'y'], 'the public half only');
  const claims = decodeJwt(one);
  assert.equal(claims.htm, 'POST');
  assert.equal(claims.htu, 'https://rs.example/mcp', 'no query, no fragment');
  assert.equal(claims.nonce, 'n-1');
  assert.equal(claims.ath, createHash('sha256').update(token, 'ascii').digest('base64url'), 'ath: the token\'s SHA-256, base64url');
  assert.ok(Math.abs(Number(claims.iat) - Date.now() / 1000) < 5);
  assert.notEqual(claims.jti, decodeJwt(two).jti, 'a fresh jti per proof');
  assert.equal(decodeJwt(two).ath, undefined, 'no ath at a token endpoint');
  assert.equal(htuOf('http://127.0.0.1:9/as/token?a=b'), 'http://127.0.0.1:9/as/token');
  assert.equal(readDpopNonce('eyJ7S_-.~ok'), 'eyJ7S_-.~ok');
  for (const bad of ['two words', '', 'quote"d', 'back\\slash', ['a', 'b']]) assert.equal(readDpopNonce(bad), 'malformed', JSON.stringify(bad));
  assert.equal(readDpopNonce(undefined), undefined);
});

test('a link at a DPoP server: proved at the token endpoint and on every request, both nonces honoured', { timeout: 120_000 }, async () => {
  const { client, completed } = await watchedClient(gateway.endpoint('bound'), await idp.token({ sub: 'alice', aud: gateway.audience }), 'dpop-journey');
  try {
    const link = await linkRequired(client, 'whoami');
    await linkInBrowser(browser, link.url, 'bound', [idp.subjectCookie('alice')]);
    await eventually('notifications/elicitation/complete', () => completed.includes(link.elicitationId));
    const result = (await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;

    const tokenRecords = server.records.filter((r) => r.endpoint === 'token');
    assert.deepEqual(tokenRecords.map((r) => [r.grant, r.status, r.error]), [['authorization_code', 400, 'use_dpop_nonce'], ['authorization_code', 200, undefined]], 'the AS nonce: one retry');
    const jkt = tokenRecords[1]!.proof!.jkt;
    assert.equal(tokenRecords[0]!.proof!.jkt, jkt, 'one key per link');
    assert.equal(tokenRecords[1]!.proof!.payload.htu, server.tokenUrl);
    assert.match(JSON.stringify(result.content), new RegExp(`key ${jkt}`), 'the backend served the token bound to that key');

    const mcp = server.records.filter((r) => r.endpoint === 'mcp');
    assert.deepEqual(mcp[0] && [mcp[0].status, mcp[0].error], [401, 'use_dpop_nonce'], 'the RS nonce asked for on the first request');
    assert.ok(mcp.slice(1).every((r) => r.status === 200), `every later request accepted: ${JSON.stringify(mcp.map((r) => [r.status, r.error]))}`);
    assert.ok(mcp.every((r) => r.scheme === 'DPoP' && r.proof?.jkt === jkt && r.proof.payload.htm === 'POST' && r.proof.payload.htu === server.mcpUrl));
    assert.equal(new Set(mcp.map((r) => r.proof!.payload.jti)).size, mcp.length, 'no proof reused');

    const stored = await shared.vault.get(userKeyOf(idp.issuer, 'alice'), 'bound');
    assert.equal(stored?.tokenType, 'DPoP');
    assert.equal(await (await dpopKey(stored!.dpopKey!)).thumbprint(), jkt, 'the vault holds the link\'s key');
    const raw = await shared.store.getValue(`vault:${userKeyOf(idp.issuer, 'alice')}:bound`);
    assert.ok(raw && !raw.includes(stored!.dpopKey!.d), 'sealed, not in the clear');
    assert.ok(!logs.lines.some((l) => l.includes(stored!.dpopKey!.d) || l.includes(stored!.accessToken)), 'neither the key nor the token in a log line');
  } finally {
    await client.close();
  }
});

test('a refresh proves the same key, and new nonces of both servers are taken with one retry each', { timeout: 60_000 }, async () => {
  const userKey = userKeyOf(idp.issuer, 'alice');
  const before = await shared.vault.get(userKey, 'bound');
  // Due now: the gateway refreshes before its next request.
  await shared.vault.put(userKey, 'bound', { ...before!, expiresAt: Date.now() + 1_000 });
  server.rotateNonces();
  const from = server.records.length;
  const { client } = await watchedClient(gateway.endpoint('bound'), await idp.token({ sub: 'alice', aud: gateway.audience }), 'dpop-refresh');
  try {
    const result = (await client.callTool({ name: 'whoami', arguments: {} })) as CallToolResult;
    const jkt = await (await dpopKey(before!.dpopKey!)).thumbprint();
    assert.match(JSON.stringify(result.content), new RegExp(`key ${jkt}`));
    const seen = server.records.slice(from);
    const refreshes = seen.filter((r) => r.endpoint === 'token');
    assert.deepEqual(refreshes.map((r) => [r.grant, r.status, r.error]), [['refresh_token', 400, 'use_dpop_nonce'], ['refresh_token', 200, undefined]]);
    assert.ok(refreshes.every((r) => r.proof?.jkt === jkt), 'the refresh token is bound to the link\'s key');
    const mcp = seen.filter((r) => r.endpoint === 'mcp');
    assert.deepEqual(mcp.filter((r) => r.status !== 200).map((r) => r.error), ['use_dpop_nonce'], 'one RS nonce retry');
    const after_ = await shared.vault.get(userKey, 'bound');
    assert.notEqual(after_?.accessToken, before!.accessToken);
    assert.deepEqual(after_?.dpopKey, before!.dpopKey, 'the key outlives the refresh');
  } finally {
    await client.close();
  }
});

test('a use_dpop_nonce without a readable nonce is the backend\'s failure, and the link stays', { timeout: 60_000 }, async () => {
  const { client } = await watchedClient(gateway.endpoint('bound'), await idp.token({ sub: 'alice', aud: gateway.audience }), 'dpop-malformed');
  server.malformedResourceNonce = true;
  server.rotateNonces();
  try {
    const refused = await client.callTool({ name: 'whoami', arguments: {} }).then(() => undefined, (err: unknown) => err);
    assert.ok(refused instanceof McpError && refused.code === -32010, `expected -32010, got ${String(refused)}`);
    assert.match(refused.message, /DPoP-Nonce/);
    assert.ok(await shared.vault.get(userKeyOf(idp.issuer, 'alice'), 'bound'), 'not taken for a refused token: still linked');
  } finally {
    server.malformedResourceNonce = false;
    await client.close();
  }
});

test('a backend that asks for a nonce again after the retry gets two requests, and the call -32010; the link stays', { timeout: 60_000 }, async () => {
  const { client } = await watchedClient(gateway.endpoint('bound'), await idp.token({ sub: 'alice', aud: gateway.audience }), 'dpop-forgetful');
  server.forgetfulResource = true;
  const from = server.records.length;
  try {
    const refused = await client.callTool({ name: 'whoami', arguments: {} }).then(() => undefined, (err: unknown) => err);
    assert.ok(refused instanceof McpError && refused.code === -32010, `expected -32010, got ${String(refused)}`);
    assert.match(refused.message, /again after the retry/);
    assert.deepEqual(server.records.slice(from).map((r) => r.error), ['use_dpop_nonce', 'use_dpop_nonce'], 'one retry, no more');
    assert.ok(await shared.vault.get(userKeyOf(idp.issuer, 'alice'), 'bound'), 'still linked');
  } finally {
    server.forgetfulResource = false;
    await client.close();
  }
});

test('a Bearer token where the backend requires DPoP-bound ones is refused at the callback; nothing stored', { timeout: 120_000 }, async () => {
  server.tokenType = 'Bearer';
  const { client } = await watchedClient(gateway.endpoint('bound'), await idp.token({ sub: 'bob', aud: gateway.audience }), 'dpop-bearer');
  const context = await browser.newContext();
  try {
    const link = await linkRequired(client, 'whoami');
    await context.addCookies([idp.subjectCookie('bob')]);
    const page = await context.newPage();
    await page.goto(link.url);
    const [callback] = await Promise.all([page.waitForResponse((r) => r.url().includes('/oauth/callback/bound?')), page.click('button[value="continue"]')]);
    assert.equal(callback.status(), 502);
    assert.equal(await shared.vault.get(userKeyOf(idp.issuer, 'bob'), 'bound'), undefined);
  } finally {
    server.tokenType = 'DPoP';
    await context.close();
    await client.close();
  }
});
