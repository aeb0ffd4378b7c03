/**
 * Two answers of real backends the gateway misread (issue 33 §7, §8), with backends shaped
 * as the conformance suite's client scenarios shape theirs
 * (test/fixtures/client-scenario-backends.ts), the official SDK client, a real Redis:
 *
 * - A stateless server (no `Mcp-Session-Id`) answers the standalone GET with 404. That 404
 *   says "no stream here", not "session gone": the client's session must live on.
 * - A server closes a call's SSE stream before answering, at an event id, with `retry: 500`
 *   (SSE polling), in a session of 2025-03-26 (the gateway gives such a client no event id
 *   to resume with) and of 2025-11-25. The gateway resumes the backend's stream itself, with
 *   `Last-Event-ID`, no sooner than the backend's `retry`, not after its own `streams.retry`
 *   (set to 30 s here, so a gateway that waited for it could not answer within the deadline);
 *   the client gets the answer on the POST it sent, and nothing else; the GET stream it
 *   resumed (which such a backend never ends) is closed once the answer is through.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startPollingBackend, startStatelessBackend, type PollingBackend } from '../fixtures/client-scenario-backends.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';

let redis: RedisHandle;
let idp: OAuthHandle;
let stateless: Awaited<ReturnType<typeof startStatelessBackend>>;
let polling2025_03: PollingBackend;
let polling2025_11: PollingBackend;
let gateway: GatewayHandle;
const clients: Client[] = [];

before(async () => {
  [redis, idp, stateless, polling2025_03, polling2025_11] = await Promise.all([startRedis(), startOAuthServer(), startStatelessBackend(), startPollingBackend('2025-03-26'), startPollingBackend('2025-11-25')]);
  gateway = await startGateway({
    issuer: idp.issuer,
    redisUrl: redis.url,
    backends: [
      { name: 'stateless', url: stateless.url },
      { name: 'polling-2025-03', url: polling2025_03.url, protocol: '2025-11-25' },
      { name: 'polling-2025-11', url: polling2025_11.url, protocol: '2025-11-25' },
    ],
    overrides: { streams: { retry: '30s' } },
  });
});

after(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await gateway?.close();
  await Promise.allSettled([stateless?.close(), polling2025_03?.close(), polling2025_11?.close(), idp?.stop(), redis?.stop()]);
});

async function connect(backend: string, sub: string): Promise<Client> {
  const token = await idp.token({ sub, aud: gateway.audience });
  const client = new Client({ name: 'stream-shapes', version: '1.0.0' }, { capabilities: {} });
  clients.push(client);
  client.onerror = () => {};
  const transport = new StreamableHTTPClientTransport(gateway.endpoint(backend), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    // The client must not be the one resuming: it gives up at once.
    reconnectionOptions: { initialReconnectionDelay: 60_000, maxReconnectionDelay: 60_000, reconnectionDelayGrowFactor: 1, maxRetries: 0 },
  });
  await withDeadline(client.connect(transport), 10_000, `connect to ${backend}`);
  return client;
}

const textOf = (result: unknown) => ((result as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('a stateless backend answers the standalone GET with 404', () => {
  test('the session lives on: lists and calls keep working after the GET stream was refused', async () => {
    const client = await connect('stateless', 'stella');
    // The SDK client opened its GET stream after initialize; the gateway asked the backend, which said 404.
    for (let round = 0; round < 3; round++) {
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['add_numbers']);
      const result = await client.callTool({ name: 'add_numbers', arguments: { a: round, b: 2 } });
      assert.equal(textOf(result), `The sum of ${round} and 2 is ${round + 2}`);
    }
    assert.ok(stateless.posts() >= 7, 'every request reached the backend');
  });
});

describe('a backend closes the call\'s stream before answering, with an event id and retry: 500', () => {
  for (const [name, backend] of [
    ['2025-03-26', () => polling2025_03],
    ['2025-11-25', () => polling2025_11],
  ] as const) {
    test(`${name} session: the gateway resumes the backend's stream with Last-Event-ID after the backend's retry, the client gets the answer`, async () => {
      const client = await connect(`polling-${name.slice(0, 7)}`, `polly-${name}`);
      const resumedBefore = backend().gets.filter((g) => g.lastEventId).length;
      const result = await withDeadline(client.callTool({ name: 'test_reconnection', arguments: {} }), 10_000, 'tools/call answered through the resumed stream');
      assert.equal(textOf(result), 'Reconnection test completed successfully');
      const resumes = backend().gets.filter((g) => g.lastEventId).slice(resumedBefore);
      assert.equal(resumes.length, 1, 'one GET with Last-Event-ID');
      assert.match(resumes[0]!.lastEventId!, /^event-\d+$/);
      const waited = resumes[0]!.at - backend().closedAt()!;
      assert.ok(waited >= 450, `resumed ${waited.toFixed(0)} ms after the close: not before the backend's retry (500 ms)`);
      // The backend keeps a GET stream open; with the answer through, the gateway lets go of it.
      await withDeadline(
        (async () => {
          while (!resumes[0]!.closed) await new Promise((resolve) => setTimeout(resolve, 50));
        })(),
        5_000,
        'the gateway closing the resumed GET stream once the answer was through',
      );
    });
  }
});
