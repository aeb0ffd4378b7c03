/**
 * Token exchange with short-lived tokens (issue 45 §2, a regression): an authorization
 * server issuing 5-second tokens. The exchange cache keeps a token for half its remaining
 * lifetime, and half an odd number of milliseconds is a fraction; sent to Redis as a `PX`
 * TTL it was refused ("ERR value is not an integer or out of range") and the user's call
 * failed with -32010 "the gateway's state store is unavailable". Here, on two replicas
 * sharing a real Redis, with the real exchange server process (test/fixtures/exchange-server.ts)
 * and a backend that accepts only tokens exchanged for it: every call of several users
 * succeeds, over long enough that each user's token is exchanged several times (and so with
 * lifetimes of both parities), and each token is reused by the next calls until its half-life.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeJwt } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { withDeadline } from '../helpers/deadline.js';
import { exchangesOf, startExchangeBackend, startExchangeServer, type ExchangeBackend, type ExchangeServer } from '../helpers/exchange.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

const TOKEN_TTL_S = 5;
const USERS = ['alice', 'bob', 'carol', 'dave'];
/** How long each user keeps calling: past two half-lives, so that each user's token is exchanged at least three times. */
const CALLING_MS = 6_000;
const CALL_EVERY_MS = 250;

let redis: RedisHandle;
let idp: OAuthHandle;
let exchange: ExchangeServer;
let hr: ExchangeBackend;
let set: ReplicaSet;
const tokens: Record<string, string> = {};

before(async () => {
  [redis, idp] = await Promise.all([startRedis(), startOAuthServer()]);
  exchange = await startExchangeServer({ idpIssuer: idp.issuer, tokenTtlSeconds: TOKEN_TTL_S });
  hr = await startExchangeBackend(exchange.issuer, 'hr-api');
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: idp.issuer,
    backends: [
      {
        name: 'hr',
        url: hr.url,
        tokenExchange: { tokenUrl: exchange.tokenUrl, clientId: exchange.clientId, clientSecret: exchange.clientSecret, audience: 'hr-api', scopes: ['hr.read'] },
      },
    ],
    extra: { secrets: { tokenKey: 'short-lived-exchange-token-key-0123456789' } },
  });
  for (const sub of USERS) tokens[sub] = await idp.token({ sub, aud: set.audience, scope: 'hr' });
});

after(async () => {
  if (process.env.SB_DEBUG_REPLICAS) for (const r of set?.replicas ?? []) process.stderr.write(`--- replica ${r.index}\n${r.child.logs()}\n`);
  await set?.stop();
  await Promise.allSettled([hr?.stop(), exchange?.stop(), idp?.stop(), redis?.stop()]);
});

/** `whoami` as `user` every CALL_EVERY_MS for CALLING_MS, each request to the next replica; the answers. */
async function keepCalling(user: string): Promise<Array<{ sub: string; aud: string }>> {
  const client = new Client({ name: 'short-lived-exchange', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[0]!.url}/mcp/hr`), {
    fetch: set.roundRobinFetch(),
    requestInit: { headers: { Authorization: `Bearer ${tokens[user]}` } },
  });
  await withDeadline(client.connect(transport), 15_000, `connect ${user}`);
  try {
    const answers: Array<{ sub: string; aud: string }> = [];
    const until = Date.now() + CALLING_MS;
    while (Date.now() < until) {
      const result = (await withDeadline(client.callTool({ name: 'whoami', arguments: {} }), 15_000, `whoami as ${user}`)) as CallToolResult;
      assert.ok(!result.isError, `${user}'s call failed: ${JSON.stringify(result.content)}`);
      answers.push(JSON.parse((result.content[0] as { text: string }).text) as { sub: string; aud: string });
      await sleep(CALL_EVERY_MS);
    }
    return answers;
  } finally {
    await client.close();
  }
}

test('5-second exchanged tokens: every call of every user succeeds; each token is reused, then replaced', { timeout: 120_000 }, async () => {
  const answers = await Promise.all(USERS.map(keepCalling));
  USERS.forEach((sub, i) => {
    assert.ok(answers[i]!.length >= 10, `${sub} made ${answers[i]!.length} calls`);
    for (const answer of answers[i]!) assert.deepEqual(answer, { sub, aud: 'hr-api' });
  });

  const all = await exchange.exchanges();
  for (const sub of USERS) {
    const n = exchangesOf(all, sub).filter((e) => e.aud === 'hr-api').length;
    // Reused for ~2.5 s (half of 5 s) across both replicas, so replaced every ~2.5 s — not once per call.
    assert.ok(n >= 3 && n <= 6, `${sub}: ${n} exchanges in ${CALLING_MS} ms of calls`);
  }
  const seen = await hr.seenAuthorizations();
  for (const header of seen) {
    const claims = decodeJwt(header.replace(/^Bearer /, ''));
    assert.equal(claims.iss, exchange.issuer, 'only exchanged tokens reach the backend');
    assert.ok(claims.exp! - claims.iat! <= TOKEN_TTL_S + 1, 'a short-lived token');
  }

  const logs = set.replicas.map((r) => r.child.logs()).join('\n');
  assert.doesNotMatch(logs, /not an integer or out of range/);
});
