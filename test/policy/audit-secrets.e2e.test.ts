/**
 * The audit trail leaks nothing (issue 30 §2: "No token, cookie, `requestState` or third-party
 * credential ever appears in it; have a test that greps for them"), over one whole user journey
 * through real parts: two gateway replicas (the CLI) on one real Redis, one writing its audit
 * to stdout beside its access log and one to a file, arguments opted in; a real OAuth server
 * signs the user in; a strict backend needs the user's linked account at a second real OAuth
 * server, linked through the connect page in Chromium; a backend takes tokens exchanged at a
 * real RFC 8693 server. The client's requests alternate between the replicas.
 *
 * Every secret the journey handled is collected where it passed: the user's token, the
 * provider's code, PKCE verifier, access, refresh and ID tokens (a recording hop in front of
 * its token endpoint), the `state` and every other query value of the browser's trip, the
 * browser's cookies, the exchanged token (as the backend received it), the client secrets and
 * the gateway's keys, and the raw `sub`. Then every audit record and every log line of both
 * replicas is searched for each.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { stringify } from 'yaml';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { launchBrowser, type BrowserHandle } from '../helpers/browser.js';
import { startExchangeBackend, startExchangeServer, type ExchangeBackend, type ExchangeServer } from '../helpers/exchange.js';
import { eventually, linkInBrowser, linkRequired, type BrowserTrail } from '../helpers/linking-journey.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startProtectedBackend, type ProtectedBackend } from '../helpers/protected-backend.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

const SUB = 'zelda-4f7c1e9a';
const THIRD_PARTY_SUB = 'zelda-at-acme-5d2b';
const PROVIDER_SECRET = 'acme-client-secret-7a1f03c9';
const KEYS = { cookieKey: 'audit-journey-cookie-key-0123456789abcdef0123', tokenKey: 'audit-journey-token-key-0123456789abcdef0123' };
const AUDIT_LINE = '{"schema":"switchboard.audit/v1"';

let redis: RedisHandle, idp: OAuthHandle, provider: OAuthHandle, exchange: ExchangeServer;
let strict: ProtectedBackend, hr: ExchangeBackend, browser: BrowserHandle, replicas: ReplicaSet;
let tokenHop: RecordingHop;
let dir = '';

/** A hop in front of the provider's token endpoint that keeps every form field and token it passed. */
interface RecordingHop {
  url: string;
  seen: string[];
  close(): Promise<void>;
}

async function recordingHop(target: string): Promise<RecordingHop> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString();
      seen.push(...new URLSearchParams(body).values());
      const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (basic) seen.push(basic, decodeURIComponent(Buffer.from(basic, 'base64').toString().split(':')[1] ?? ''));
      const headers: Record<string, string> = { 'content-type': req.headers['content-type'] ?? 'application/x-www-form-urlencoded' };
      if (req.headers.authorization) headers.authorization = req.headers.authorization;
      const answer = await fetch(target, { method: 'POST', headers, body });
      const text = await answer.text();
      try {
        for (const value of Object.values(JSON.parse(text) as Record<string, unknown>)) if (typeof value === 'string') seen.push(value);
      } catch {
        // not JSON: nothing to remember
      }
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/token`, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

before(async () => {
  [redis, idp, provider, browser] = await Promise.all([startRedis(), startOAuthServer(), startOAuthServer(), launchBrowser()]);
  exchange = await startExchangeServer({ idpIssuer: idp.issuer });
  [strict, hr, tokenHop] = await Promise.all([startProtectedBackend(provider.issuer), startExchangeBackend(exchange.issuer, 'hr-api'), recordingHop(provider.tokenEndpoint)]);
  dir = await mkdtemp(join(tmpdir(), 'sb-audit-secrets-'));
  const upstreamAuth = { provider: 'acme', authorizationUrl: provider.authorizationEndpoint, tokenUrl: tokenHop.url, clientId: 'switchboard', clientSecret: PROVIDER_SECRET, scopes: ['repo'] };
  const tokenExchange = { tokenUrl: exchange.tokenUrl, clientId: exchange.clientId, clientSecret: exchange.clientSecret, audience: 'hr-api' };
  const backends = [
    { name: 'protected', url: strict.url, upstreamAuth },
    { name: 'hr', url: hr.url, tokenExchange },
  ];
  const login = { clientId: 'switchboard-web', scopes: ['openid'] };
  replicas = await startReplicas({
    backends,
    auth: { login },
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    extra: {
      secrets: KEYS,
      log: { level: 'info' },
      policy: { rules: [{ name: 'no-ask', effect: 'deny', when: 'mcp.tool.name == "ask"' }] },
    },
    // Replica 0 writes its audit to stdout beside its access log, replica 1 to a file.
    writeConfig: async (index, config) => {
      const audit = index === 0 ? { sink: 'stdout' } : { sink: 'file', path: join(dir, 'audit.jsonl'), flushInterval: 0 };
      const file = join(dir, `replica-${index}.yaml`);
      await writeFile(file, stringify({ ...config, audit: { ...audit, claims: ['email'], arguments: { include: true } } }));
      return file;
    },
  });
});

after(async () => {
  await browser?.close();
  await replicas?.stop();
  await Promise.allSettled([strict?.stop(), hr?.stop(), tokenHop?.close(), exchange?.stop(), provider?.stop(), idp?.stop(), redis?.stop()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function connect(path: string, token: string): Promise<{ client: Client; completed: string[] }> {
  const client = new Client({ name: 'audit-journey', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  const completed: string[] = [];
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completed.push(n.params.elicitationId));
  const transport = new StreamableHTTPClientTransport(new URL(path, replicas.replicas[0]!.url), { fetch: replicas.roundRobinFetch(), requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  return { client, completed };
}

const text = (result: unknown) => JSON.stringify((result as CallToolResult).content);

/** Every value worth finding: long enough not to match by chance, and the JWTs' payload and signature apart. */
function secretsOf(named: Record<string, string[]>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [what, values] of Object.entries(named)) {
    assert.ok(values.length > 0, `the journey handled no ${what}: nothing to look for`);
    for (const value of values) {
      const parts = value.split('.');
      for (const part of parts.length === 3 ? [value, parts[1]!, parts[2]!] : [value]) if (part.length >= 8) out.push([what, part]);
    }
  }
  return out;
}

test('one journey — sign-in, allowed and denied calls, a link in the browser, a linked call, a token exchange — leaves no secret in the audit or the logs', { timeout: 180_000 }, async () => {
  const userToken = await idp.token({ sub: SUB, aud: replicas.audience, claims: { email: 'zelda@example.com' } });
  const trail: BrowserTrail = { urls: [], cookies: [] };
  const linked = await connect('/mcp/protected', userToken);
  const link = await linkRequired(linked.client, 'connect');
  await linkInBrowser(browser, link.url, 'acme', [idp.subjectCookie(SUB), provider.subjectCookie(THIRD_PARTY_SUB)], trail);
  await eventually('notifications/elicitation/complete', () => linked.completed.includes(link.elicitationId));
  assert.match(text(await linked.client.callTool({ name: 'whoami', arguments: { note: 'hello' } })), new RegExp(`third-party user: ${THIRD_PARTY_SUB}`));
  await assert.rejects(linked.client.callTool({ name: 'ask', arguments: {} }), (err) => err instanceof McpError && err.code === -32602);
  await linked.client.close();

  const exchanged = await connect('/mcp/hr', userToken);
  assert.match(text(await exchanged.client.callTool({ name: 'whoami', arguments: {} })), /hr-api/);
  await exchanged.client.close();

  const [fileRecords, thirdParty, exchangedAuth] = await Promise.all([readFile(join(dir, 'audit.jsonl'), 'utf8'), strict.seenAuthorizations(), hr.seenAuthorizations()]);
  const logs = replicas.replicas.map((r) => r.child.logs());
  const stdoutRecords = logs[0]!.split('\n').filter((l) => l.startsWith(AUDIT_LINE));
  const records = [...fileRecords.split('\n').filter(Boolean), ...stdoutRecords].map((l) => JSON.parse(l) as Record<string, unknown>);
  // The journey is in the audit: the link requirement (a record not tied to one request), the
  // linked call, the denial, the exchanged call.
  const seen = records.map((r) => `${r.backend} ${r.tool ?? '-'} ${r.decision} ${r.rule} ${r.outcome}`);
  for (const expected of ['protected - deny upstreamAuth.link error', 'protected whoami allow policy.default ok', 'protected ask deny no-ask error', 'hr whoami allow policy.default ok']) {
    assert.ok(seen.includes(expected), `missing "${expected}" in:\n${seen.join('\n')}`);
  }
  assert.ok(stdoutRecords.length > 0 && fileRecords.length > 0, 'both sinks wrote records');
  assert.ok(records.some((r) => (r.arguments as { note?: string } | undefined)?.note === 'hello'), 'arguments are opted in');

  const bearer = (headers: string[]) => headers.map((h) => h.replace(/^Bearer /, ''));
  const query = trail.urls.flatMap((u) => [...new URL(u).searchParams.entries()].filter(([k]) => k !== 'scope' && k !== 'response_type' && k !== 'code_challenge_method').map(([, v]) => v));
  const callback = trail.urls.map((u) => new URL(u)).find((u) => u.pathname === '/oauth/callback/acme');
  const secrets = secretsOf({
    'user access token': [userToken],
    'third-party access token': bearer(thirdParty),
    'token endpoint value (code, verifier, tokens, client auth)': tokenHop.seen.filter((v) => v !== 'authorization_code' && v !== 'refresh_token' && v !== 'Bearer' && v !== 'switchboard' && !/^\d+$/.test(v) && !v.startsWith('http')),
    'OAuth code': [callback?.searchParams.get('code') ?? ''].filter(Boolean),
    'OAuth state': [callback?.searchParams.get('state') ?? ''].filter(Boolean),
    'query value of the browser trip': query.filter((v) => v.length >= 16 && !v.startsWith('http')),
    // The test IdP's and provider's sign-in cookies hold only the chosen `sub`, judged below.
    cookie: trail.cookies.filter((c) => c !== SUB && c !== THIRD_PARTY_SUB),
    'exchanged token': bearer(exchangedAuth),
    'client secret or key': [PROVIDER_SECRET, exchange.clientSecret, KEYS.cookieKey, KEYS.tokenKey],
  });
  // The raw `sub` must stay out of the audit; the access log carries it by design (SPEC §6 "Logs":
  // request id and `sub` on each line), next to the `user` digest that joins it to the audit.
  for (const record of records) assert.ok(!JSON.stringify(record).includes(SUB), `an audit record holds the raw sub: ${JSON.stringify(record)}`);
  const places = { 'audit records': records.map((r) => JSON.stringify(r)).join('\n'), 'replica 0 output (audit and access log)': logs[0]!, 'replica 1 output (access log)': logs[1]! };
  for (const [where, haystack] of Object.entries(places)) {
    for (const [what, secret] of secrets) assert.ok(!haystack.includes(secret), `${where} holds a ${what}: ${secret}\n${haystack.split('\n').filter((l) => l.includes(secret)).join('\n')}`);
  }
  assert.match(logs[1]!, /"msg":"request completed"|"url"/, 'the access log was searched (it is on)');
});
