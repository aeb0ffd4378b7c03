/**
 * Backends that know only MCP 2024-11-05 (SPEC §1, backend side) through the gateway: the
 * bridge presents them as 2025-03-26 sessions (src/backends/bridge/legacy-revision.ts)
 * while speaking 2024-11-05 to them. The backend is a hand-written legacy HTTP+SSE server
 * (test/fixtures/legacy-2024-sse-server.ts, no SDK server code) and its stdio variant; the
 * client is the official SDK (Streamable HTTP, real JWT).
 *
 * Checked: initialize succeeds and the client sees 2025-03-26; the backend was asked the
 * client's own revision and never received an MCP-Protocol-Version header or a batch;
 * tools/list, tools/call, ping and an unknown method relay; a JSON-RPC batch of a
 * 2025-03-26 session reaches the backend as single messages; DELETE closes the SSE
 * connection; a backend naming a revision the gateway cannot bridge gets a clear JSON-RPC
 * error and its connection closed; the aggregated endpoint `/mcp` includes the backend.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BRIDGED_PROTOCOL_VERSION } from '../../src/backends/bridge/legacy-revision.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '../../src/wire/protocol.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { withDeadline } from '../helpers/deadline.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';
import { LEGACY_SERVER_NAME, LEGACY_TOOL, startLegacy2024SseServer, type Legacy2024Session, type Legacy2024SseServer } from '../fixtures/legacy-2024-sse-server.js';
import { assertMcpError, connectClient, failure, textOf, type Connected } from './bridge-support.js';
import { nodeEntry } from '../helpers/node-entry.js';

const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/legacy-2024-stdio-server.ts', import.meta.url));
const PROMPT_MS = 5_000;
const BOGUS_VERSION = 'not-a-revision';

let oauth: OAuthHandle | undefined;
let legacy: Legacy2024SseServer | undefined;
let gateway: GatewayHandle | undefined;
let token = '';
const clients: Connected[] = [];

/** Connects a client to `/mcp/legacy` and returns it with the fixture session it opened. */
async function connectLegacy(): Promise<{ session: Connected; backend: Legacy2024Session }> {
  const before = legacy!.sessions.length;
  const session = await connectClient(gateway!.endpoint('legacy'), token, clients);
  assert.equal(legacy!.sessions.length, before + 1, 'one SSE connection per session');
  return { session, backend: legacy!.sessions.at(-1)! };
}

/** What the fixture received on a session's POSTs, parsed. */
function received(backend: Legacy2024Session): Array<Record<string, unknown>> {
  return backend.posts.map((p) => JSON.parse(p.body) as Record<string, unknown>);
}

before(async () => {
  [oauth, legacy] = await Promise.all([startOAuthServer(), startLegacy2024SseServer()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [
      { name: 'legacy', transport: 'sse', url: legacy.url, timeout: '10s' },
      { name: 'bogus', transport: 'sse', url: `${legacy.url}?answer=${BOGUS_VERSION}`, timeout: '10s' },
      { name: 'legacy-stdio', transport: 'stdio', command: process.execPath, args: nodeEntry(STDIO_FIXTURE), timeout: '15s' },
    ],
  });
  token = await oauth.token({ sub: 'legacy-user', aud: gateway.audience });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), legacy?.close()]);
});

test('2025-03-26 is what a bridged 2024-11-05 backend is presented as: the oldest revision the gateway speaks', async () => {
  const { session, backend } = await connectLegacy();
  // The client offered the newest revision; the backend answered 2024-11-05.
  assert.equal(backend.requestedVersion, SUPPORTED_PROTOCOL_VERSIONS[0]);
  assert.equal(session.transport.protocolVersion, '2025-03-26');
  // The session goes on in that revision; one older is not spoken by the gateway at all.
  const ping = (version: string) =>
    fetch(gateway!.endpoint('legacy'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': session.transport.sessionId!, 'mcp-protocol-version': version },
      body: JSON.stringify({ jsonrpc: '2.0', id: `ping-${version}`, method: 'ping' }),
      signal: AbortSignal.timeout(10_000),
    }).then(async (res) => [res.status, await res.text()] as const);
  const [presented, older] = [await ping('2025-03-26'), await ping('2024-11-05')];
  assert.equal(presented[0], 200, presented[1]);
  assert.equal(older[0], 400, older[1]);
  await session.close();
});

describe('a 2024-11-05-only SSE server through /mcp/{backend}', () => {
  test('initialize is presented as 2025-03-26; tools/list, tools/call, ping and errors relay', async () => {
    const { session, backend } = await connectLegacy();
    assert.equal(session.client.getServerVersion()?.name, LEGACY_SERVER_NAME);
    assert.equal(session.transport.protocolVersion, BRIDGED_PROTOCOL_VERSION, 'the client negotiated 2025-03-26');
    // The client's own request reached the backend unchanged; the backend answered 2024-11-05.
    assert.equal(backend.requestedVersion, SUPPORTED_PROTOCOL_VERSIONS[0]);

    const tools = await withDeadline(session.client.listTools(), 10_000, 'tools/list');
    assert.deepEqual(
      tools.tools.map((t) => t.name),
      [LEGACY_TOOL],
    );
    const echo = await withDeadline(session.client.callTool({ name: LEGACY_TOOL, arguments: { text: 'hello, 2024' } }), 10_000, 'tools/call');
    assert.equal(textOf(echo), 'legacy: hello, 2024');
    assert.deepEqual(await withDeadline(session.client.ping(), 5_000, 'ping'), {});
    const { error } = await failure(() => session.client.listPrompts(), 10_000, 'prompts/list on a server without prompts');
    assertMcpError(error, -32601, /Method not found/);

    // 2024-11-05 knows no MCP-Protocol-Version header and no batches: neither reached it.
    assert.ok(backend.posts.length >= 5, `posts seen: ${backend.posts.length}`);
    for (const post of backend.posts) {
      assert.equal(post.headers['mcp-protocol-version'], undefined, `header sent with ${post.body}`);
      assert.equal(post.headers.authorization, undefined, 'the client token never reaches the backend');
      assert.ok(!post.body.trimStart().startsWith('['), `a batch reached the backend: ${post.body}`);
    }
    assert.deepEqual(
      received(backend).map((m) => m.method),
      ['initialize', 'notifications/initialized', 'tools/list', 'tools/call', 'ping', 'prompts/list'],
    );
    await session.close();
  });

  test('a JSON-RPC batch of the 2025-03-26 session reaches the backend as single messages', async () => {
    const { session, backend } = await connectLegacy();
    const sessionId = session.transport.sessionId!;
    const before = backend.posts.length;
    const batch = [
      { jsonrpc: '2.0', id: 'batch-1', method: 'tools/list' },
      { jsonrpc: '2.0', id: 'batch-2', method: 'tools/call', params: { name: LEGACY_TOOL, arguments: { text: 'in a batch' } } },
    ];
    const res = await fetch(gateway!.endpoint('legacy'), {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        'mcp-session-id': sessionId,
        'mcp-protocol-version': BRIDGED_PROTOCOL_VERSION,
      },
      body: JSON.stringify(batch),
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(res.status, 200, await res.clone().text());
    const answers: Array<Record<string, unknown>> = [];
    const collect = (m: unknown) => {
      for (const x of Array.isArray(m) ? m : m ? [m] : []) answers.push(x as Record<string, unknown>);
    };
    if ((res.headers.get('content-type') ?? '').startsWith('application/json')) {
      collect(await res.json());
    } else {
      const reader = new SseReader(res);
      await reader.until((e) => {
        collect(messageOf(e));
        return batch.every((r) => answers.some((a) => a.id === r.id));
      });
      await reader.cancel();
    }
    const call = answers.find((a) => a.id === 'batch-2');
    assert.ok(answers.some((a) => a.id === 'batch-1' && 'result' in a), JSON.stringify(answers));
    assert.equal(textOf(call?.result), 'legacy: in a batch');
    const arrived = backend.posts.slice(before);
    assert.deepEqual(
      arrived.map((p) => (JSON.parse(p.body) as { id?: unknown }).id),
      ['batch-1', 'batch-2'],
      'two POSTs with one message each',
    );
    await session.close();
  });

  test('DELETE ends the session and closes its SSE connection', async () => {
    const { session, backend } = await connectLegacy();
    assert.equal(backend.isClosed(), false);
    await withDeadline(session.transport.terminateSession(), 10_000, 'DELETE');
    await withDeadline(backend.closed, 5_000, 'the fixture seeing its SSE connection closed');
  });

  test('a backend naming a revision the gateway cannot bridge: a clear JSON-RPC error, connection closed', async () => {
    const before = legacy!.sessions.length;
    const { error, elapsed } = await failure(() => connectClient(gateway!.endpoint('bogus'), token, clients), PROMPT_MS, 'connect to a backend with a bogus revision');
    assertMcpError(error, -32010, new RegExp(`backend "bogus" negotiated protocol version "${BOGUS_VERSION}", which the gateway cannot bridge`));
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
    const backend = legacy!.sessions[before];
    assert.ok(backend, 'the bogus backend was reached');
    await withDeadline(backend.closed, 5_000, 'the refused session closing its SSE connection');
  });
});

describe('a 2024-11-05-only stdio server through /mcp/{backend}', () => {
  test('initialize is presented as 2025-03-26; tools/call works', async () => {
    const session = await connectClient(gateway!.endpoint('legacy-stdio'), token, clients);
    assert.equal(session.transport.protocolVersion, BRIDGED_PROTOCOL_VERSION);
    const echo = await withDeadline(session.client.callTool({ name: LEGACY_TOOL, arguments: { text: 'over stdio' } }), 10_000, 'tools/call');
    assert.equal(textOf(echo), 'legacy: over stdio');
    await session.close();
  });
});

describe('the aggregated endpoint /mcp', () => {
  test('includes the 2024-11-05 backends (namespaced) and leaves out the one that cannot be bridged', async () => {
    const client = new Client({ name: 'legacy-aggregate-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${gateway!.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
    clients.push({ client, transport, sampled: [], close: () => client.close().catch(() => {}) });
    await withDeadline(client.connect(transport), 15_000, 'connect to /mcp');
    // One backend's page per client page (src/aggregate/lists.ts): walk the cursor.
    const names: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await withDeadline(client.listTools(cursor === undefined ? undefined : { cursor }), 10_000, 'tools/list on /mcp');
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor !== undefined && names.length < 10);
    names.sort();
    assert.deepEqual(names, [`legacy-stdio__${LEGACY_TOOL}`, `legacy__${LEGACY_TOOL}`].sort());
    const echo = await withDeadline(client.callTool({ name: `legacy__${LEGACY_TOOL}`, arguments: { text: 'aggregated' } }), 10_000, 'tools/call on /mcp');
    assert.equal(textOf(echo), 'legacy: aggregated');
    await client.close();
  });
});
