/**
 * A call whose answer never arrives still gets its audit record (issue 30 §2: one record for
 * each request that reaches a backend), with the outcome saying why: `timeout` (the backend
 * did not answer within its timeout), `disconnected` (its stream closed without the response),
 * `cancelled` (the client went away first; not covered here yet). Real parts: an OAuth server, the scripted backend
 * whose tools misbehave as named (test/fixtures/misbehaving-backend.ts), the SDK client, the
 * audit to a real file.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startScriptedBackend, type ScriptedBackend } from '../fixtures/misbehaving-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

let oauth: OAuthHandle | undefined, scripted: ScriptedBackend | undefined, gateway: GatewayHandle | undefined;
let dir = '', token = '';

before(async () => {
  [oauth, scripted, dir] = await Promise.all([startOAuthServer(), startScriptedBackend(), mkdtemp(join(tmpdir(), 'sb-unanswered-'))]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [
      { name: 'quick', url: scripted.url, timeout: '1s' },
      { name: 'patient', url: scripted.url, timeout: '60s' },
    ],
    overrides: { audit: { sink: 'file', path: join(dir, 'audit.jsonl'), flushInterval: 0 } },
  });
  token = await oauth.token({ sub: 'uma', aud: gateway.audience });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), scripted?.close()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function connect(backend: string): Promise<Client> {
  const client = new Client({ name: 'unanswered', version: '1.0.0' });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(gateway!.endpoint(backend), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, `connect ${backend}`);
  return client;
}

/** The records of `tool` on `backend`, as [outcome, code]. */
async function outcomes(backend: string, tool: string): Promise<Array<[unknown, unknown]>> {
  const text = await readFile(join(dir, 'audit.jsonl'), 'utf8').catch(() => '');
  const records = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  return records.filter((r) => r.backend === backend && r.tool === tool).map((r) => [r.outcome, r.code]);
}

test('a backend that does not answer in time: timeout', { timeout: 30_000 }, async () => {
  const client = await connect('quick');
  try {
    await assert.rejects(client.callTool({ name: 'hang', arguments: {} }), /did not answer in time|-32011/);
    await assert.rejects(client.callTool({ name: 'hang-stream', arguments: {} }), /did not answer in time|-32011/);
  } finally {
    await client.close();
  }
  assert.deepEqual(await outcomes('quick', 'hang'), [['timeout', -32011]], 'no headers in time');
  assert.deepEqual(await outcomes('quick', 'hang-stream'), [['timeout', -32011]], 'a stream that stopped');
});

test('a stream that closes without the response: disconnected', { timeout: 30_000 }, async () => {
  const client = await connect('patient');
  try {
    await assert.rejects(client.callTool({ name: 'sse-close', arguments: {} }));
  } finally {
    await client.close();
  }
  assert.deepEqual(await outcomes('patient', 'sse-close'), [['disconnected', -32012]]);
});
