/**
 * What a reload applies to a running gateway (src/reload/apply-config.ts), in process: the
 * file's new config handed to `app.applyConfig` as config-watch.ts hands it after loading.
 * A policy, a backend's required scopes and the rate limit change for the next request of an
 * existing session, which itself goes on; a backend pointed at another server has its
 * sessions end (404) and the next initialize reaches the new server; restart-only changes
 * apply nothing. Real SDK backends (test/fixtures/announcing-backend.ts), a real OAuth server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { Config, ConfigInput } from '../../src/config/schema.js';
import { restartOnlyChanges } from '../../src/reload/restart-keys.js';
import { waitUntil } from '../helpers/child.js';
import { exchangesOf, startExchangeBackend, startExchangeServer } from '../helpers/exchange.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { sessionToolNames } from '../helpers/pages.js';
import { sessionClient } from '../helpers/session-client.js';

let oauth: OAuthHandle;
let alpha: FixtureChild;
let beta: FixtureChild;
let gateway: GatewayHandle;
let token: string;

before(async () => {
  [oauth, alpha, beta] = await Promise.all([startOAuthServer(), startFixtureChild('announcing-backend.ts'), startFixtureChild('announcing-backend.ts')]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'alpha', url: alpha.url }] });
  token = await oauth.token({ sub: 'applying-user', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([alpha?.child.stop(), beta?.child.stop(), oauth?.stop()]);
});

/** The gateway's config as first loaded, with `change` over its top level, validated as a file would be. */
function configWith(change: Partial<ConfigInput>): Config {
  const { url, audience } = gateway;
  const port = Number(new URL(url).port);
  return parseConfig({ publicUrl: url, listen: { host: '127.0.0.1', port }, auth: { issuer: oauth.issuer, audience, algorithms: ['RS256', 'ES256'] }, log: { level: 'silent' }, backends: [{ name: 'alpha', url: alpha.url }], ...change });
}

const alphaClient = sessionClient(() => gateway.endpoint('alpha'), 'apply-test');

async function toolNames(sessionId: string): Promise<string[]> {
  const res = await alphaClient.post(token, { jsonrpc: '2.0', id: 'l', method: 'tools/list' }, sessionId);
  assert.equal(res.status, 200);
  const text = await res.text();
  const json = text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data: {'))!.slice(6);
  return ((JSON.parse(json) as { result: { tools: Array<{ name: string }> } }).result.tools).map((t) => t.name);
}

describe('applying a reloaded config', () => {
  test('a tool policy added reaches the next request of an existing session, which goes on', async () => {
    const sessionId = await alphaClient.initialize(token);
    assert.deepEqual(await toolNames(sessionId), ['announce']);
    assert.equal(gateway.app.applyConfig(configWith({ backends: [{ name: 'alpha', url: alpha.url, access: { tools: { deny: ['announce'] } } }] })), 'applied');
    assert.deepEqual(await toolNames(sessionId), [], 'the same session, the new policy');
    assert.equal(gateway.app.applyConfig(configWith({})), 'applied');
    assert.deepEqual(await toolNames(sessionId), ['announce']);
    assert.equal(gateway.app.applyConfig(configWith({})), 'unchanged');
  });

  test('log.level changes at once', () => {
    assert.equal(gateway.app.applyConfig(configWith({ log: { level: 'warn' } })), 'applied');
    assert.equal(gateway.app.log.level, 'warn');
    gateway.app.applyConfig(configWith({}));
    assert.equal(gateway.app.log.level, 'silent');
  });

  test("a backend's required scopes change what its path asks of a token", async () => {
    const sessionId = await alphaClient.initialize(token);
    assert.equal(gateway.app.applyConfig(configWith({ backends: [{ name: 'alpha', url: alpha.url, access: { scopes: ['alpha:use'] } }] })), 'applied');
    const refused = await alphaClient.post(token, { jsonrpc: '2.0', id: 'p', method: 'ping' }, sessionId);
    assert.equal(refused.status, 403);
    assert.match(refused.headers.get('www-authenticate') ?? '', /insufficient_scope/);
    await refused.text();
    const scoped = await oauth.token({ sub: 'applying-user', aud: gateway.audience, scope: 'alpha:use' });
    assert.equal(await alphaClient.pingStatus(scoped, sessionId), 200);
    gateway.app.applyConfig(configWith({}));
  });

  test('the rate limit changes at once', async () => {
    const sessionId = await alphaClient.initialize(token);
    assert.equal(gateway.app.applyConfig(configWith({ limits: { rateLimit: { max: 1, window: '1m' } } })), 'applied');
    const statuses = [await alphaClient.pingStatus(token, sessionId), await alphaClient.pingStatus(token, sessionId)];
    assert.ok(statuses.includes(429), `one of two pings over a limit of 1 per minute is refused: ${statuses}`);
    assert.equal(gateway.app.applyConfig(configWith({ limits: { rateLimit: { enabled: false } } })), 'applied');
    assert.equal(await alphaClient.pingStatus(token, sessionId), 200);
    gateway.app.applyConfig(configWith({}));
  });

  test('a backend pointed at another server: its sessions end with 404, a new initialize reaches the new server', async () => {
    const sessionId = await alphaClient.initialize(token);
    assert.equal(gateway.app.applyConfig(configWith({ backends: [{ name: 'alpha', url: beta.url }] })), 'applied');
    assert.equal(await alphaClient.pingStatus(token, sessionId), 404);
    const again = await alphaClient.initialize(token);
    assert.equal(await alphaClient.pingStatus(token, again), 200);
    gateway.app.applyConfig(configWith({}));
  });

  test('a backend added joins existing /mcp sessions on their next message', async () => {
    const aggregated = sessionClient(() => new URL(`${gateway.url}/mcp`), 'apply-test');
    const sessionId = await aggregated.initialize(token);
    const names = () => sessionToolNames(aggregated, token, sessionId);
    assert.deepEqual(await names(), ['alpha__announce']);
    assert.equal(gateway.app.applyConfig(configWith({ backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta', url: beta.url }] })), 'applied');
    await waitUntil(async () => ((await names()).includes('beta__announce') ? true : undefined), { what: 'beta to join the /mcp session', timeoutMs: 15_000, intervalMs: 100 });
    gateway.app.applyConfig(configWith({}));
    assert.deepEqual(await names(), ['alpha__announce'], 'a removed member leaves the lists at once');
  });

  test('tokenExchange added to a backend by a reload: its calls get a token exchanged for the user; removed: they do not', async () => {
    const exchange = await startExchangeServer({ idpIssuer: oauth.issuer });
    const hr = await startExchangeBackend(exchange.issuer, 'hr-api');
    try {
      const hrClient = sessionClient(() => gateway.endpoint('hr'), 'apply-test');
      const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'apply-test', version: '1' } } };
      const plain = { name: 'hr', url: hr.url };
      assert.equal(gateway.app.applyConfig(configWith({ backends: [{ name: 'alpha', url: alpha.url }, plain] })), 'applied');
      const refused = await hrClient.post(token, initialize);
      const refusedText = await refused.text();
      assert.ok(refused.status !== 200 || /"error"/.test(refusedText), `the backend accepts only exchanged tokens: ${refused.status} ${refusedText}`);
      const tokenExchange = { tokenUrl: exchange.tokenUrl, clientId: exchange.clientId, clientSecret: exchange.clientSecret, audience: 'hr-api' };
      assert.equal(gateway.app.applyConfig(configWith({ backends: [{ name: 'alpha', url: alpha.url }, { ...plain, tokenExchange }] })), 'applied');
      const sessionId = await hrClient.initialize(token);
      assert.equal(await hrClient.pingStatus(token, sessionId), 200);
      assert.ok(exchangesOf(await exchange.exchanges(), 'applying-user').some((e) => e.aud === 'hr-api'));
      assert.equal(gateway.app.applyConfig(configWith({ backends: [{ name: 'alpha', url: alpha.url }, plain] })), 'applied');
      const seen = (await hr.seenAuthorizations()).length;
      const unexchanged = await hrClient.post(token, { jsonrpc: '2.0', id: 'p', method: 'ping' }, sessionId);
      const unexchangedText = await unexchanged.text();
      assert.ok(unexchanged.status !== 200 || /"error"/.test(unexchangedText), `without tokenExchange the backend refuses the call: ${unexchanged.status} ${unexchangedText}`);
      assert.equal((await hr.seenAuthorizations()).length, seen, 'and it was sent no token at all');
    } finally {
      gateway.app.applyConfig(configWith({}));
      await Promise.allSettled([hr.stop(), exchange.stop()]);
    }
  });

  test('a restart-only change applies nothing, not even the rest of the file', async () => {
    const next = configWith({ allowedHosts: ['gateway.example'], backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta', url: beta.url }] });
    assert.equal(gateway.app.applyConfig(next), 'needs_restart');
    assert.equal(gateway.app.mcp.backends.has('beta'), false);
    assert.deepEqual(gateway.app.mcp.config.allowedHosts, []);
  });
});

describe('restartOnlyChanges', () => {
  const base = () => configWith({});
  test('names the restart-only keys that differ, nested ones by their path', () => {
    assert.deepEqual(restartOnlyChanges(base(), base()), []);
    assert.deepEqual(restartOnlyChanges(base(), configWith({ listen: { host: '0.0.0.0', port: 1 }, limits: { maxBodyBytes: 2048 } })), ['listen', 'limits.maxBodyBytes']);
    assert.deepEqual(restartOnlyChanges(base(), configWith({ limits: { rateLimit: { max: 5 } }, aggregate: { fanoutTimeout: '9s' } })), []);
  });

  test('backends reached through something started once (stdio, sse) need a restart; streamable-http ones, with upstreamAuth or not, do not', () => {
    const stdio = configWith({ backends: [{ name: 'alpha', url: alpha.url }, { name: 'local', transport: 'stdio', command: 'node' }] });
    assert.deepEqual(restartOnlyChanges(base(), stdio), ['backends.local']);
    assert.deepEqual(restartOnlyChanges(stdio, base()), ['backends.local']);
    assert.deepEqual(restartOnlyChanges(base(), configWith({ backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta', url: beta.url, headers: { x: 'y' } }] })), []);
    const auth = { issuer: oauth.issuer, audience: gateway.audience, algorithms: ['RS256' as const], login: { clientId: 'switchboard-web', scopes: ['openid'] } };
    const plain = configWith({ auth });
    const linked = (scopes: string[]) => configWith({ auth, backends: [{ name: 'alpha', url: alpha.url }, { name: 'gh', url: beta.url, upstreamAuth: { provider: 'acme', authorizationUrl: 'https://acme.test/authorize', tokenUrl: 'https://acme.test/token', clientId: 'sb', scopes } }] });
    assert.deepEqual(restartOnlyChanges(plain, linked(['repo'])), []);
    assert.deepEqual(restartOnlyChanges(linked(['repo']), linked(['repo', 'read:org'])), []);
    assert.deepEqual(restartOnlyChanges(linked(['repo']), plain), []);
  });
});
