/**
 * A 2025-11-25 backend that writes the tool's result before it acknowledges the client's
 * answer (issue 28 §6, "lost results"): the bridge gives the backend the answer of a 2026
 * client's retry, waits for the acknowledgement, then reads the call's stream on — where the
 * result already came. Before the fix the result was taken by a read that `nextWithin`
 * (backends/backend-messages.ts) had left in flight when the call parked, and dropped: the tool
 * ran and the client got -32603.
 *
 * Real parts: an SDK server (test/fixtures/ack-after-result-backend.ts), a gateway on a real
 * Redis, a real OAuth server, the raw 2026-07-28 wire.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { answering, statelessCall } from '../helpers/stateless-call.js';

const TRIES = 5;

let redis: RedisHandle;
let oauth: OAuthHandle;
let backend: FixtureChild;
let gateway: GatewayHandle;
let token: string;

before(async () => {
  [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
  backend = await startFixtureChild('ack-after-result-backend.ts');
  gateway = await startGateway({ issuer: oauth.issuer, redisUrl: redis.url, backends: [{ name: 'greeter', url: backend.url, protocol: '2025-11-25' }] });
  token = await oauth.token({ sub: 'ada', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([backend?.child.stop(), oauth?.stop(), redis?.stop()]);
});

test(`a result written before the answer is acknowledged reaches the client (${TRIES} of ${TRIES})`, async () => {
  const outcomes: string[] = [];
  for (let n = 0; n < TRIES; n++) {
    const call = { endpoint: gateway.endpoint('greeter'), token, name: 'greet' };
    const first = await statelessCall({ ...call, id: 10 * n });
    const retry = answering(first, { action: 'accept', content: { name: `Ada ${n}` } });
    const done = await statelessCall({ ...call, id: 10 * n + 1, extra: retry });
    outcomes.push(done.result?.content?.[0]?.text ?? `error ${done.error?.code}: ${done.error?.message}`);
  }
  assert.deepEqual(outcomes, Array.from({ length: TRIES }, (_, n) => `Hello, Ada ${n}!`));
});
