/**
 * Legacy HTTP+SSE backends (MCP 2024-11-05; SPEC §1, backend side) through the gateway:
 * the official SDK client speaks Streamable HTTP to `/mcp/{backend}` with a real JWT; the
 * gateway reaches a local bridge (src/backends/bridge/) that holds one SSE connection per
 * MCP session to test/fixtures/legacy-sse-backend.ts (the SDK's SSEServerTransport).
 *
 * Checked: the whole conversation (tools, progress, sampling, resources); one SSE
 * connection per session, sent with the backend's static headers and never the client's
 * token; DELETE closes that connection; a dropped connection ends the session (404); an
 * unreachable SSE server gives a clear JSON-RPC error promptly; shutdown closes them all.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { withDeadline } from '../helpers/deadline.js';
import { startLegacySseBackend, type LegacySseBackend, type LegacySseConnection } from '../fixtures/legacy-sse-backend.js';
import { assertMcpError, connectClient, exerciseBackend, expectSessionEnded, failure, type Connected } from './bridge-support.js';

const PROMPT_MS = 5_000;

let oauth: OAuthHandle | undefined;
let legacy: LegacySseBackend | undefined;
let gateway: GatewayHandle | undefined;
let token = '';
const clients: Connected[] = [];

/** Connects a client and returns it with the SSE connection its session opened at the fixture. */
async function connectWithConnection(g: GatewayHandle, t: string): Promise<{ session: Connected; connection: LegacySseConnection }> {
  const before = legacy!.connections.length;
  const session = await connectClient(g.endpoint('legacy'), t, clients);
  assert.equal(legacy!.connections.length, before + 1, 'one SSE connection per session');
  return { session, connection: legacy!.connections.at(-1)! };
}

before(async () => {
  [oauth, legacy] = await Promise.all([startOAuthServer(), startLegacySseBackend()]);
  const deadPort = await freePort();
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [
      { name: 'legacy', transport: 'sse', url: legacy.url, headers: { 'X-Team': 'platform' }, timeout: '10s' },
      { name: 'gone', transport: 'sse', url: `http://127.0.0.1:${deadPort}/sse`, timeout: '10s' },
    ],
  });
  token = await oauth.token({ sub: 'sse-user', aud: gateway.audience });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await Promise.allSettled([oauth?.stop(), legacy?.close()]);
});

describe('a legacy SSE backend through the gateway', () => {
  test('initialize, tools/list, tools/call, progress, sampling and resources/read', async () => {
    const { session, connection } = await connectWithConnection(gateway!, token);
    assert.equal(session.client.getServerVersion()?.name, 'bridge-fixture');
    await exerciseBackend(session);
    // Static headers go to the backend; the client's bearer token never does.
    assert.equal(connection.headers['x-team'], 'platform');
    assert.equal(connection.headers.authorization, undefined);
    assert.equal(connection.headers['x-switchboard-bridge-key'], undefined);
    await session.close();
  });

  test('DELETE ends the session and closes its SSE connection', async () => {
    const { session, connection } = await connectWithConnection(gateway!, token);
    assert.equal(connection.isClosed(), false);
    await withDeadline(session.transport.terminateSession(), 10_000, 'DELETE');
    await withDeadline(connection.closed, 5_000, 'the fixture seeing its SSE connection closed');
  });

  test('a dropped SSE connection ends the session: the next request gets 404', async () => {
    const { session, connection } = await connectWithConnection(gateway!, token);
    const reconnectsBefore = legacy!.connections.length;
    connection.drop();
    await expectSessionEnded(() => session.client.ping());
    // The bridge does not silently reconnect into a new, uninitialized backend session.
    assert.equal(legacy!.connections.length, reconnectsBefore);
  });

  test('an SSE server that cannot be reached: McpError -32010, promptly', async () => {
    const { error, elapsed } = await failure(() => connectClient(gateway!.endpoint('gone'), token, clients), PROMPT_MS, 'connect to an unreachable SSE server');
    assertMcpError(error, -32010, /backend "gone" could not be started/);
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
  });
});

describe('SSE bridge sessions end with the gateway', () => {
  test('closing the gateway closes every SSE connection', async () => {
    const closing = await startGateway({ issuer: oauth!.issuer, backends: [{ name: 'legacy', transport: 'sse', url: legacy!.url }] });
    let closed = false;
    try {
      const closingToken = await oauth!.token({ sub: 'sse-user', aud: closing.audience });
      const first = await connectWithConnection(closing, closingToken);
      const second = await connectWithConnection(closing, closingToken);
      closed = true;
      await withDeadline(closing.close(), 15_000, 'gateway close');
      await withDeadline(Promise.all([first.connection.closed, second.connection.closed]), 5_000, 'SSE connections closed');
    } finally {
      if (!closed) await closing.close();
    }
  });
});
