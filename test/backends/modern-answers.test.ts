/**
 * The answers of 2025-11-25 clients to the requests the gateway sends for a 2026-07-28
 * backend (src/backends/modern/input-answers.ts) count only from the session that was asked
 * (issue 28 §6, "answers routed by id alone"): Alice's call asks her by elicitation; before she
 * answers, Bob's session — and another session of Alice's own — post an answer under the id of
 * her request. Neither reaches her call; her own answer does.
 *
 * Real parts: two gateway replicas on one Redis (the forged answers land on the replica that
 * does not wait, so they cross the coordinator as a real answer would, and on the replica that
 * waits, where no coordinator stands between them and the round), the dual-era
 * conformance fixture serving 2026-07-28 only, the official v1 SDK client.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';

let oauth: OAuthHandle;
let redis: RedisHandle;
let backend: ConformanceServer;
let set: ReplicaSet;
const clients: Client[] = [];

before(async () => {
  [oauth, redis, backend] = await Promise.all([startOAuthServer(), startRedis(), startConformanceServer({ eras: '2026' })]);
  set = await startReplicas({ count: 2, redisUrl: redis.url, issuer: oauth.issuer, backends: [{ name: 'modern', url: backend.url }] });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await set?.stop();
  await Promise.allSettled([backend?.stop(), redis?.stop(), oauth?.stop()]);
});

/** A session of `sub` on replica `replica`: its client, and a way to post a raw message in it. */
async function session(sub: string, replica: number): Promise<{ client: Client; post(message: unknown): Promise<number> }> {
  const token = await oauth.token({ sub, aud: set.audience });
  const client = new Client({ name: `${sub}-client`, version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  const transport = new StreamableHTTPClientTransport(new URL(`${set.replicas[replica]!.url}/mcp/modern`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  clients.push(client);
  const post = async (message: unknown) => {
    const res = await fetch(set.endpoint(replica, 'modern'), {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        'mcp-session-id': transport.sessionId!,
      },
      body: JSON.stringify(message),
    });
    await res.body?.cancel();
    return res.status;
  };
  return { client, post };
}

/**
 * Alice's call on replica 0 asks her; before she answers, Bob's session and another session of
 * Alice's, both on replica `forgersReplica`, post an answer under the id of her request.
 */
async function forgedAnswers(forgersReplica: number): Promise<void> {
  const alice = await session('alice', 0);
  const [bob, aliceElsewhere] = await Promise.all([session('bob', forgersReplica), session('alice', forgersReplica)]);
  const forged: number[] = [];
  alice.client.setRequestHandler(ElicitRequestSchema, async (_request, extra) => {
    const answer = (name: string) => ({ jsonrpc: '2.0', id: extra.requestId, result: { action: 'accept', content: { name } } });
    // Taken (202) as any response in a session; what matters is whose call it answers.
    forged.push(await bob.post(answer('Mallory')), await aliceElsewhere.post(answer('Alice in another session')));
    return { action: 'accept', content: { name: 'Alice' } };
  });
  const result = await alice.client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
  assert.deepEqual(forged, [202, 202]);
  assert.deepEqual((result.content as Array<{ text?: string }>).map((c) => c.text), ['Hello, Alice!']);
}

test("an answer under the id of Alice's request, from Bob's session or another of Alice's, does not answer her call (posted to the other replica)", async () => {
  await forgedAnswers(1);
});

test("an answer under the id of Alice's request, from Bob's session or another of Alice's, does not answer her call (posted to the replica that waits)", async () => {
  await forgedAnswers(0);
});
