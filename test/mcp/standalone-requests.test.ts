/**
 * Server→client requests sent on the backend's standalone GET stream are not lost (issue
 * 13 §1): the backend asks for `sampling/createMessage` with `server.request()` and no
 * `relatedRequestId` the instant its tool is called, and the client calls the tool right
 * after connecting — before its own GET may have reached the backend. The gateway opens
 * the backend's standalone stream when `notifications/initialized` goes through and keeps
 * what arrives until the client's stream attaches, on whichever replica.
 *
 * Real parts: two gateway replicas on a real Redis, a real OAuth server, an SDK server as
 * the backend (test/fixtures/standalone-requests-backend.ts) and the SDK client.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { spawnChild, type ChildHandle } from '../helpers/child.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { nodeEntry } from '../helpers/node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/standalone-requests-backend.ts', import.meta.url));
const CALLS = 50;
/** A lost request shows as a call that does not complete; this bounds the wait for one. */
const CALL_TIMEOUT_MS = 8_000;

let redis: RedisHandle;
let idp: OAuthHandle;
let backend: ChildHandle;
let replicas: ReplicaSet;

before(async () => {
  [redis, idp] = await Promise.all([startRedis(), startOAuthServer()]);
  backend = await spawnChild({
    name: 'standalone-requests backend',
    command: process.execPath,
    args: nodeEntry(FIXTURE),
    env: { PORT: '0', NODE_OPTIONS: '' },
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
  const url = (JSON.parse(backend.readyLine!) as { url: string }).url;
  replicas = await startReplicas({ count: 2, redisUrl: redis.url, issuer: idp.issuer, backends: [{ name: 'asker', url }] });
});

after(async () => {
  await replicas?.stop();
  await Promise.allSettled([backend?.stop(), idp?.stop(), redis?.stop()]);
});

/** Connects, calls `ask` at once, and says whether the sampling request reached the client. */
async function connectAndAsk(token: string, fetchFn: typeof fetch): Promise<'answered' | string> {
  const client = new Client({ name: 'sampler', version: '1.0.0' }, { capabilities: { sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text: 'hi' } }));
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp/asker', replicas.replicas[0]!.url), { fetch: fetchFn, requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  try {
    const result = (await client.callTool({ name: 'ask', arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS })) as CallToolResult;
    const text = JSON.stringify(result.content);
    return text.includes('client said: hi') ? 'answered' : `unexpected result ${text}`;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await client.close();
  }
}

for (const [label, spread] of [
  ['one replica', false],
  ['requests alternating between two replicas', true],
] as const) {
  test(`${CALLS} sessions that call at once: no sampling request lost (${label})`, { timeout: CALLS * CALL_TIMEOUT_MS + 60_000 }, async () => {
    const token = await idp.token({ sub: `sampler-${spread ? 'two' : 'one'}`, aud: replicas.audience });
    const fetchFn = spread ? replicas.roundRobinFetch() : fetch;
    const lost: string[] = [];
    for (let i = 0; i < CALLS; i++) {
      const outcome = await connectAndAsk(token, fetchFn);
      if (outcome !== 'answered') lost.push(`call ${i}: ${outcome}`);
    }
    assert.deepEqual(lost, [], `${lost.length} of ${CALLS} lost`);
  });
}
