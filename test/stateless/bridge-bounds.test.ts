/**
 * The per-user bounds of the 2026 → 2025 bridge (issue 28 §5; config `stateless.*`,
 * src/stateless/session-budget.ts, lanes.ts, parked-calls.ts): what one user's MCP 2026-07-28
 * calls hold on a 2025-11-25 backend, counted on the backend itself.
 *
 * - Lanes: calls running at once with one capability set take at most MAX_LANES backend
 *   sessions (sixty calls opened fifty-four before).
 * - Sessions: each distinct `clientCapabilities` took another backend session, without end;
 *   now a user holds `stateless.maxSessionsPerUser`, and one more is 429 -32016.
 * - Parked calls: a user holds `stateless.maxParkedPerUser` per replica; one more ends with
 *   429 -32016, and the backend's handler is answered rather than left waiting.
 *
 * Real parts: two gateway replicas on one Redis, a real OAuth server, an SDK server that counts
 * its sessions (test/fixtures/counted-sessions-backend.ts), the raw 2026-07-28 wire.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { MAX_LANES } from '../../src/stateless/lanes.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { answering, statelessCall, type StatelessAnswer } from '../helpers/stateless-call.js';

const MAX_SESSIONS = 12;
const MAX_PARKED = 10;

let redis: RedisHandle;
let oauth: OAuthHandle;
let backend: FixtureChild;
let backendUrl: string;
let set: ReplicaSet;

before(async () => {
  [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
  backend = await startFixtureChild('counted-sessions-backend.ts');
  backendUrl = backend.url;
  set = await startReplicas({
    count: 2,
    redisUrl: redis.url,
    issuer: oauth.issuer,
    backends: [{ name: 'counted', url: backendUrl, protocol: '2025-11-25' }],
    extra: { secrets: { tokenKey: randomBytes(32).toString('base64url') }, stateless: { maxSessionsPerUser: MAX_SESSIONS, maxParkedPerUser: MAX_PARKED } },
  });
});

after(async () => {
  await set?.stop();
  await Promise.allSettled([backend?.child.stop(), oauth?.stop(), redis?.stop()]);
});

/** The backend's sessions (opened so far, open now) and its `greet` questions (still waiting, and the errors that answered them). */
async function backendSessions(): Promise<{ opened: number; live: number; greets: { waiting: number; errors: string[] } }> {
  return (await fetch(new URL('/switchboard/sessions', backendUrl))).json() as Promise<{ opened: number; live: number; greets: { waiting: number; errors: string[] } }>;
}

/** `greet` answered for each of `firsts` (their input_required rounds), on the replica each was made. */
function answerAll(token: string, firsts: Array<{ replica: number; answer: StatelessAnswer }>, idBase: number): Promise<StatelessAnswer[]> {
  return Promise.all(
    firsts.map(({ replica, answer }, n) =>
      statelessCall({ endpoint: set.endpoint(replica, 'counted'), token, id: idBase + n, name: 'greet', extra: answering(answer, { action: 'accept', content: { name: `caller ${n}` } }) }),
    ),
  );
}

const texts = (answers: StatelessAnswer[]) => answers.map((a) => a.result?.content?.[0]?.text ?? `error ${a.error?.code}`);

test(`calls running at once with one capability set take at most ${MAX_LANES} backend sessions, on two replicas`, async () => {
  const token = await oauth.token({ sub: 'lanes', aud: set.audience });
  const before = await backendSessions();
  const replicaOf = (n: number) => n % 2;
  const firsts = await Promise.all(
    Array.from({ length: 2 * MAX_PARKED }, async (_, n) => ({ replica: replicaOf(n), answer: await statelessCall({ endpoint: set.endpoint(replicaOf(n), 'counted'), token, id: n, name: 'greet' }) })),
  );
  assert.deepEqual(firsts.map((f) => f.answer.result?.resultType ?? JSON.stringify(f.answer)), firsts.map(() => 'input_required'));
  const during = await backendSessions();
  assert.ok(during.live - before.live <= MAX_LANES, `${during.live - before.live} sessions held for one capability set`);
  // Each replica opens a lane's session once; the replica that stores it second ends its own.
  assert.ok(during.opened - before.opened <= 2 * MAX_LANES, `${during.opened - before.opened} sessions opened`);
  const done = await answerAll(token, firsts, 100);
  assert.deepEqual(texts(done), firsts.map((_, n) => `Hello, caller ${n}!`));
});

test(`one user holds at most stateless.maxSessionsPerUser (${MAX_SESSIONS}) sessions, whatever capabilities the calls declare`, async () => {
  const token = await oauth.token({ sub: 'capabilities', aud: set.audience });
  const before = await backendSessions();
  const answers: StatelessAnswer[] = [];
  for (let n = 0; n < MAX_SESSIONS + 2; n++) {
    const capabilities = { elicitation: {}, experimental: { [`variant-${n}`]: {} } };
    answers.push(await statelessCall({ endpoint: set.endpoint(n % 2, 'counted'), token, id: n, name: 'hello', capabilities }));
  }
  assert.deepEqual(
    answers.map((a) => a.result?.content?.[0]?.text ?? `${a.status} ${a.error?.code} ${a.error?.data?.limit}`),
    [...Array.from({ length: MAX_SESSIONS }, () => 'Hello!'), ...Array.from({ length: 2 }, () => '429 -32016 stateless.maxSessionsPerUser')],
  );
  assert.equal((await backendSessions()).live - before.live, MAX_SESSIONS);
  const other = await statelessCall({ endpoint: set.endpoint(0, 'counted'), token: await oauth.token({ sub: 'someone-else', aud: set.audience }), id: 1, name: 'hello' });
  assert.equal(other.result?.content?.[0]?.text, 'Hello!', "another user's own bound");
});

test(`one user parks at most stateless.maxParkedPerUser (${MAX_PARKED}) calls on a replica; one more is 429 -32016`, async () => {
  const token = await oauth.token({ sub: 'parker', aud: set.audience });
  const before = (await backendSessions()).greets;
  const answers = await Promise.all(Array.from({ length: MAX_PARKED + 1 }, (_, n) => statelessCall({ endpoint: set.endpoint(0, 'counted'), token, id: n, name: 'greet' })));
  const parked = answers.filter((a) => a.result?.resultType === 'input_required');
  const refused = answers.filter((a) => a.result?.resultType !== 'input_required');
  assert.equal(parked.length, MAX_PARKED);
  assert.deepEqual(refused.map((a) => [a.status, a.error?.code, a.error?.data?.limit]), [[429, -32016, 'stateless.maxParkedPerUser']]);
  // The refused call's handler on the backend was answered (with an error, before the 429 was sent), not left waiting.
  const afterRefusal = (await backendSessions()).greets;
  assert.deepEqual(afterRefusal.errors.slice(before.errors.length), ['MCP error -32603: the client has too many calls waiting for input']);
  assert.equal(afterRefusal.waiting - before.waiting, MAX_PARKED, 'only the parked calls wait on the backend');
  const other = await statelessCall({ endpoint: set.endpoint(0, 'counted'), token: await oauth.token({ sub: 'another-parker', aud: set.audience }), id: 1, name: 'greet' });
  assert.equal(other.result?.resultType, 'input_required', "another user's own bound");
  const done = await answerAll(token, parked.map((answer) => ({ replica: 0, answer })), 100);
  assert.deepEqual(texts(done), parked.map((_, n) => `Hello, caller ${n}!`));
  assert.equal((await backendSessions()).greets.waiting - before.waiting, 1, "only another-parker's call still waits");
});
