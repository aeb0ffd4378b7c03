/**
 * A bridged call's `requestState` is bound to the endpoint it was issued at (issue 28 §6): a
 * call parked through `/mcp/finance`, which only the finance group may use, cannot be
 * completed through `/mcp/open`, which leads to the same 2025-11-25 backend for everyone; a
 * retry through `/mcp/finance` is judged by that endpoint's access rules again, with the
 * retry's own token.
 *
 * Real parts: two gateway replicas on one Redis (the retries land on the replica that does not
 * hold the call), a real OAuth server, the conformance fixture's 2025-11-25 session era.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { answering, statelessCall } from '../helpers/stateless-call.js';

const TOOL = 'test_input_required_result_elicitation';

let oauth: OAuthHandle;
let redis: RedisHandle;
let backend: ConformanceServer;
let set: ReplicaSet;
let inFinance: string;
let notInFinance: string;

before(async () => {
  [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startConformanceServer({ eras: '2025' })]);
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: oauth.issuer,
    backends: [
      { name: 'finance', url: backend.url, protocol: '2025-11-25', access: { claims: { groups: ['finance'] } } },
      { name: 'open', url: backend.url, protocol: '2025-11-25' },
    ],
    extra: { secrets: { tokenKey: randomBytes(32).toString('base64url') } },
  });
  // The same user, before and after leaving the finance group.
  [inFinance, notInFinance] = await Promise.all([
    oauth.token({ sub: 'ada', aud: set.audience, claims: { groups: ['finance'] } }),
    oauth.token({ sub: 'ada', aud: set.audience, claims: { groups: [] } }),
  ]);
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([backend?.stop(), redis?.stop(), oauth?.stop()]);
});

/** A call parked through /mcp/finance on replica 0: the params of a retry that answers it. */
async function parkedInFinance(id: number) {
  const first = await statelessCall({ endpoint: set.endpoint(0, 'finance'), token: inFinance, id, name: TOOL });
  return answering(first, { action: 'accept', content: { name: 'Ada' } });
}

test('a call parked through /mcp/finance is not completed through /mcp/open', async () => {
  const retry = await parkedInFinance(1);
  const elsewhere = await statelessCall({ endpoint: set.endpoint(1, 'open'), token: notInFinance, id: 2, name: TOOL, extra: retry });
  assert.deepEqual([elsewhere.error?.code, elsewhere.result?.content?.[0]?.text], [-32602, undefined], JSON.stringify(elsewhere));
  assert.match(elsewhere.error!.message, /other-endpoint/);
  // The call still waits for the retry it belongs to.
  const done = await statelessCall({ endpoint: set.endpoint(1, 'finance'), token: inFinance, id: 3, name: TOOL, extra: retry });
  assert.equal(done.result?.content?.[0]?.text, 'Hello, Ada!', JSON.stringify(done));
});

test("the retry through /mcp/finance is judged by its rules again, with the retry's token", async () => {
  const retry = await parkedInFinance(10);
  const outside = await statelessCall({ endpoint: set.endpoint(1, 'finance'), token: notInFinance, id: 11, name: TOOL, extra: retry });
  assert.deepEqual([outside.status, outside.error?.code], [403, -32015], JSON.stringify(outside));
  const inside = await statelessCall({ endpoint: set.endpoint(1, 'finance'), token: inFinance, id: 12, name: TOOL, extra: retry });
  assert.equal(inside.result?.content?.[0]?.text, 'Hello, Ada!', JSON.stringify(inside));
});
