/**
 * The audit records of refusals made outside the rules (issue 30 §2): the access block's 403
 * (before the body is read), a link requirement (`upstreamAuth`, -32042) and the rate limit's
 * 429 — each one record naming what refused, with the user's digest and never a credential.
 * Real Redis, a real IdP and provider (OAuth test servers), the strict protected backend and
 * the SDK bank backend; the audit goes to a real file.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startBankBackend, type BankBackend } from '../fixtures/bank-backend.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

const AUDIENCE = 'https://audit.test/mcp';
const SECRETS = { cookieKey: 'audit-cookie-key-0123456789abcdef0123456789', tokenKey: 'audit-token-key-0123456789abcdef01234567890' };
let redis: RedisHandle | undefined, idp: OAuthHandle | undefined, provider: OAuthHandle | undefined;
let strict: ProtectedBackend | undefined, bank: BankBackend | undefined, gateway: GatewayHandle | undefined;
let dir = '';
const tokens: string[] = [];

before(async () => {
  [redis, idp, provider, bank] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer(), startBankBackend('legacy')]);
  strict = await startProtectedBackend(provider.issuer);
  dir = await mkdtemp(join(tmpdir(), 'sb-audit-refusals-'));
  gateway = await startGateway({
    issuer: idp.issuer,
    backends: [
      { name: 'strict', url: strict.url, upstreamAuth: { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: provider.tokenEndpoint, clientId: 'switchboard', scopes: ['repo'] } },
      { name: 'bank', url: bank.url, access: { tenants: ['acme'] } },
    ],
    overrides: {
      redis: { url: redis.url, keyPrefix: 'auditref:' },
      secrets: SECRETS,
      auth: { issuer: idp.issuer, audience: AUDIENCE, algorithms: ['RS256'], tenantClaim: 'org', login: { clientId: 'switchboard-web', scopes: ['openid'] } },
      limits: { rateLimit: { max: 3, window: '1m' } },
      audit: { sink: 'file', path: join(dir, 'audit.jsonl'), flushInterval: 0, claims: ['email'] },
    },
  });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([strict?.stop(), bank?.close(), provider?.stop(), idp?.stop(), redis?.stop()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function token(sub: string, org: string): Promise<string> {
  const t = await idp!.token({ sub, aud: AUDIENCE, claims: { org, email: `${sub}@${org}.example` } });
  tokens.push(t);
  return t;
}

function post(backend: string, token: string, message: unknown, sessionId?: string): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
  if (sessionId) headers['mcp-session-id'] = sessionId;
  return fetch(gateway!.endpoint(backend), { method: 'POST', headers, body: JSON.stringify(message) });
}

const initialize = (capabilities: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'raw', version: '1' } } });

async function records(): Promise<Array<Record<string, unknown>>> {
  const text = await readFile(join(dir, 'audit.jsonl'), 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

test('the access block, a link requirement and the rate limit each write one refusal record', async () => {
  const bob = await token('bob', 'globex');
  const denied = await post('bank', bob, initialize());
  assert.equal(denied.status, 403);
  await denied.body?.cancel();

  const alice = await token('alice', 'acme');
  const init = await post('strict', alice, initialize({ elicitation: { url: {} } }));
  const sessionId = init.headers.get('mcp-session-id')!;
  await init.text();
  const call = await post('strict', alice, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'whoami', arguments: {} } }, sessionId);
  assert.equal(((await call.json()) as { error?: { code: number } }).error?.code, -32042);

  const carol = await token('carol', 'acme');
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) {
    const res = await post('bank', carol, initialize());
    statuses.push(res.status);
    await res.body?.cancel();
  }
  assert.deepEqual(statuses, [200, 200, 200, 429]);

  const all = await records();
  const access = all.filter((r) => r.rule === 'access.tenants');
  assert.equal(access.length, 1, JSON.stringify(all));
  assert.equal(access[0]!.decision, 'deny');
  assert.equal(access[0]!.code, -32015);
  assert.equal(access[0]!.backend, 'bank');
  assert.equal(access[0]!.endpoint, '/mcp/bank');
  assert.equal(access[0]!.tenant, 'globex');
  assert.deepEqual(access[0]!.claims, { email: 'bob@globex.example' });

  const link = all.filter((r) => r.rule === 'upstreamAuth.link');
  assert.equal(link.length, 1);
  assert.equal(link[0]!.backend, 'strict');
  assert.equal(link[0]!.session, sessionId);
  assert.equal(link[0]!.code, -32042);

  const limited = all.filter((r) => r.rule === 'limits.rateLimit');
  assert.equal(limited.length, 1);
  assert.equal(limited[0]!.code, -32029);
  assert.equal(limited[0]!.tenant, 'acme');
});

test('no token, cookie, key or requestState appears in the audit output', async () => {
  const text = await readFile(join(dir, 'audit.jsonl'), 'utf8');
  assert.ok(text.length > 0);
  for (const t of tokens) for (const part of t.split('.')) assert.ok(!text.includes(part), 'no part of a token');
  for (const secret of Object.values(SECRETS)) assert.ok(!text.includes(secret));
  assert.doesNotMatch(text, /bearer|authorization|cookie|requestState|"sub"|"(alice|bob|carol)"/i);
});
