/**
 * A call the client cancels is recorded `cancelled` at once (issue 30 §2; MCP 2025-11-25
 * "Cancellation"), not left to the backend's timeout: a real SDK client aborts `callTool` (its
 * AbortSignal sends `notifications/cancelled`) once the slow tool of a real SDK backend has
 * reported progress, so the call is known to be in flight. A record left to the backend's
 * timeout (15 s) would say `timeout`, not `cancelled`.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawnChild, waitUntil, type ChildHandle } from '../helpers/child.js';
import { startConformanceServer, type ConformanceServer } from '../helpers/conformance.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { nodeEntry } from '../helpers/node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/misbehaving-backend.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

let oauth: OAuthHandle | undefined, backend: ChildHandle | undefined, modern: ConformanceServer | undefined, gateway: GatewayHandle | undefined;
let dir = '', token = '';

before(async () => {
  // A 2026-07-28-only v2 SDK server: its `test_tool_with_progress` reports progress, then waits `delayMs` between steps.
  [oauth, dir, modern] = await Promise.all([startOAuthServer(), mkdtemp(join(tmpdir(), 'sb-cancelled-')), startConformanceServer({ eras: '2026' })]);
  // The fixture's SDK server (McpServer, stateful Streamable HTTP): `slow` reports progress every 100 ms for 60 s.
  backend = await spawnChild({
    name: 'slow SDK backend',
    command: process.execPath,
    args: nodeEntry(FIXTURE),
    cwd: ROOT,
    env: { SB_MISBEHAVING_CHILD: '1', PORT: '0' },
    readyTimeoutMs: 20_000,
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
  const url = (JSON.parse(backend.readyLine!) as { url: string }).url;
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'slow', url, timeout: '15s' }, { name: 'modern', url: modern.url, timeout: '15s' }], overrides: { audit: { sink: 'file', path: join(dir, 'audit.jsonl'), flushInterval: 0 } } });
  token = await oauth.token({ sub: 'cleo', aud: gateway.audience });
});

after(async () => {
  // The backends first: a cancelled call's stream they keep open would hold the gateway's close.
  await Promise.allSettled([backend?.stop(), modern?.stop()]);
  await gateway?.close();
  await oauth?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The records of `tool` on `backend`, as [outcome, code]. */
async function outcomes(backendName = 'slow', tool = 'slow'): Promise<Array<[unknown, unknown]>> {
  const text = await readFile(join(dir, 'audit.jsonl'), 'utf8').catch(() => '');
  const records = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  return records.filter((r) => r.backend === backendName && r.tool === tool).map((r) => [r.outcome, r.code]);
}

test('a call the client cancels (notifications/cancelled) is recorded cancelled at once', { timeout: 60_000 }, async () => {
  const client = new Client({ name: 'cancels', version: '1.0.0' });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(gateway!.endpoint('slow'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, 'connect');
  try {
    const abort = new AbortController();
    const call = client.callTool({ name: 'slow', arguments: {} }, undefined, { signal: abort.signal, onprogress: () => abort.abort('the user gave up') });
    await assert.rejects(withDeadline(call, 20_000, 'the cancelled call'));
    const recorded = await waitUntil(async () => ((await outcomes()).length ? outcomes() : undefined), { what: 'the audit record of the cancelled call', timeoutMs: 20_000 });
    assert.deepEqual(recorded, [['cancelled', undefined]]);
  } finally {
    await client.close();
  }
  // Nothing else comes for it when the session ends: the record was written once.
  assert.deepEqual(await outcomes(), [['cancelled', undefined]]);
});

test('2026-07-28: a client that closes the response stream has cancelled the call, recorded cancelled at once', { timeout: 60_000 }, async () => {
  const client = new ClientV2({ name: 'cancels-2026', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await withDeadline(client.connect(new TransportV2(gateway!.endpoint('modern'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 10_000, 'connect 2026');
  try {
    const abort = new AbortController();
    // 10 s between the progress steps: the tool is still running when the client goes. The record
    // is awaited for less than that: one that waited for the backend's next event would miss.
    const call = client.callTool({ name: 'test_tool_with_progress', arguments: { delayMs: 10_000 } }, { signal: abort.signal, onprogress: () => abort.abort('the user gave up') });
    await assert.rejects(withDeadline(call, 20_000, 'the cancelled 2026 call'));
    const recorded = await waitUntil(async () => ((await outcomes('modern', 'test_tool_with_progress')).length ? outcomes('modern', 'test_tool_with_progress') : undefined), { what: 'the audit record of the cancelled 2026 call', timeoutMs: 8_000 });
    assert.deepEqual(recorded, [['cancelled', undefined]]);
  } finally {
    await client.close();
  }
});

test('then the gateway closes within its drain timeout: no connection of the cancelled calls holds it', { timeout: 60_000 }, async () => {
  // Before http/closing-connections.ts, a connection the server no longer counted as idle held the close for 70 s.
  await Promise.allSettled([backend?.stop(), modern?.stop()]);
  const closing = gateway!;
  gateway = undefined;
  await withDeadline(closing.close(), closing.config.shutdown.drainTimeout + 5_000, 'the gateway\'s close');
});
