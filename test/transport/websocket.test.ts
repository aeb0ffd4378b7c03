/**
 * MCP over WebSocket (`/ws/mcp/{backend}`, `/ws/mcp`; subprotocol `mcp`) end to end, with
 * real parts: the official SDK `Client`, server-everything as the backend, JWTs from the
 * real OAuth server process, the in-memory store and, in the last suite, a real Redis.
 *
 * The client transport: the SDK's WebSocketClientTransport opens `new WebSocket(url, 'mcp')`
 * with the global WebSocket, which cannot send an Authorization header. {@link WsTransport}
 * speaks exactly what that transport speaks on the wire (subprotocol `mcp`, one
 * JSON.stringify'd message per text frame, frames parsed with JSONRPCMessageSchema), over
 * the `ws` package, which can set headers on the upgrade request (test/helpers/ws-transport.ts).
 * A small class of our own rather than a `ws`-backed class injected as the global WebSocket:
 * nothing global changes.
 */
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CreateMessageRequestSchema,
  LATEST_PROTOCOL_VERSION,
  LoggingMessageNotificationSchema,
  type CallToolResult,
  type CreateMessageRequest,
  type LoggingMessageNotification,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import type { EvictedSession, SessionRecord } from '../../src/state/store.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { withDeadline } from '../helpers/deadline.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { watchListenerWarnings } from '../helpers/listener-warnings.js';
import { WsTransport } from '../helpers/ws-transport.js';

const SAMPLED_TEXT = 'Sampled over WebSocket: 42';
const SAMPLED_MODEL = 'switchboard-ws-test-model';

interface Probe {
  client: Client;
  transport: WsTransport;
  sampling: Array<CreateMessageRequest['params']>;
  logs: Array<LoggingMessageNotification['params']>;
  errors: Error[];
}

async function connect(url: string, token: string, extraHeaders: Record<string, string> = {}): Promise<Probe> {
  const client = new Client({ name: 'switchboard-ws-test', version: '1.0.0' }, { capabilities: { sampling: {} } });
  const transport = new WsTransport(url, { authorization: `Bearer ${token}`, ...extraHeaders });
  const probe: Probe = { client, transport, sampling: [], logs: [], errors: [] };
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    probe.sampling.push(request.params);
    return { model: SAMPLED_MODEL, role: 'assistant', stopReason: 'endTurn', content: { type: 'text', text: SAMPLED_TEXT } };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    probe.logs.push(n.params);
  });
  client.onerror = (err) => probe.errors.push(err);
  await withDeadline(client.connect(transport), 15_000, 'client.connect over WebSocket');
  return probe;
}

interface HandshakeAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** The subprotocol the server chose, for a successful upgrade. */
  protocol?: string;
}

/** One WebSocket handshake; resolves with the HTTP answer (101 when it upgraded, then closes). */
function handshake(url: string, headers: Record<string, string>, protocols: string[] = ['mcp']): Promise<HandshakeAnswer> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocols, { headers });
    socket.once('upgrade', (res) => {
      socket.once('open', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '', protocol: socket.protocol });
        socket.close();
      });
    });
    socket.once('unexpected-response', (req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        req.destroy();
      });
    });
    socket.once('error', (err) => reject(err));
  });
}

/** Polls `check` until it returns something other than undefined. */
async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs = 8_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function textOf(result: CallToolResult | Record<string, unknown>): string {
  return ((result as CallToolResult).content ?? []).map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

function wsUrl(gateway: GatewayHandle, path: string): string {
  return `${gateway.url.replace(/^http/, 'ws')}${path}`;
}

/** A follow-up HTTP request on a session: what the gateway says about it. */
async function httpPing(gateway: GatewayHandle, path: string, token: string, sessionId: string): Promise<number> {
  const res = await fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'follow-up', method: 'ping' }),
  });
  await res.body?.cancel();
  return res.status;
}

/** A MemoryStore that remembers which sessions were created, so tests can name them. */
class RecordingStore extends MemoryStore {
  readonly created: Array<{ userKey: string; sessionId: string; record: SessionRecord }> = [];
  override async createSession(userKey: string, sessionId: string, record: SessionRecord, ttlMs: number, maxPerUser?: number): Promise<EvictedSession[]> {
    this.created.push({ userKey, sessionId, record });
    return super.createSession(userKey, sessionId, record, ttlMs, maxPerUser);
  }
}

let oauth: OAuthHandle | undefined;
let everything: EverythingHandle | undefined;

before(async () => {
  [oauth, everything] = await Promise.all([startOAuthServer(), startEverything()]);
});

after(async () => {
  await Promise.allSettled([oauth?.stop(), everything?.stop()]);
});

describe('MCP over WebSocket to server-everything (memory store)', () => {
  let gateway: GatewayHandle;
  const store = new RecordingStore();
  let alice = '';
  let bob = '';
  let probe: Probe | undefined;
  const p = () => {
    assert.ok(probe, 'the WebSocket client was not set up');
    return probe;
  };

  before(async () => {
    gateway = await startGateway({
      issuer: oauth!.issuer,
      backends: [
        { name: 'everything', url: everything!.url, timeout: '30s' },
        // Same server, but only for members of the group "eng" (access policy).
        { name: 'restricted', url: everything!.url, timeout: '30s', access: { claims: { groups: ['eng'] } } },
      ],
      store,
    });
    [alice, bob] = await Promise.all([oauth!.token({ sub: 'ws-alice', aud: gateway.audience }), oauth!.token({ sub: 'ws-bob', aud: gateway.audience })]);
    probe = await connect(wsUrl(gateway, '/ws/mcp/everything'), alice);
  });

  after(async () => {
    await probe?.client.close().catch(() => {});
    await gateway?.close();
  });

  test('initialize, tools/list and tools/call echo', async () => {
    const { client } = p();
    assert.equal(client.getServerVersion()?.name, 'mcp-servers/everything');
    assert.ok(client.getServerCapabilities()?.tools);
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'echo'), tools.map((t) => t.name).join(', '));
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'héllo over WebSocket ✓' } });
    assert.equal(textOf(echo), 'Echo: héllo over WebSocket ✓');
    // The session behind it is an ordinary gateway session of this user, on this backend.
    const session = store.created.at(-1);
    assert.equal(session?.record.backend, 'everything');
    assert.equal(session?.record.protocolVersion, LATEST_PROTOCOL_VERSION);
  });

  test('MCP 2026-07-28 messages need no session: the standard headers come from the body, answers carry resultType, bad _meta gets its error', async () => {
    const socket = new WebSocket(wsUrl(gateway, '/ws/mcp/everything'), 'mcp', { headers: { authorization: `Bearer ${alice}` } });
    const frames: Array<Record<string, unknown>> = [];
    socket.on('message', (data) => frames.push(JSON.parse(String(data)) as Record<string, unknown>));
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    try {
      const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 'modern-1', method: 'tools/call', params: { name: 'echo', arguments: { message: 'stateless ✓' }, _meta: meta } }));
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: 'modern-2', method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }));
      await waitFor('both answers', () => (frames.some((f) => f.id === 'modern-1') && frames.some((f) => f.id === 'modern-2')) || undefined);
      const call = frames.find((f) => f.id === 'modern-1') as { result: { resultType: string; content: Array<{ text: string }> } };
      assert.ok(call.result, JSON.stringify(call));
      assert.equal(call.result.resultType, 'complete');
      assert.equal(call.result.content[0]!.text, 'Echo: stateless ✓');
      const refused = frames.find((f) => f.id === 'modern-2') as { error: { code: number } };
      assert.equal(refused.error.code, -32602, JSON.stringify(refused));
    } finally {
      socket.close();
    }
  });

  test('server→client request: sampling/createMessage is answered by the client and the answer reaches the tool result', async () => {
    const probe = p();
    const before = probe.sampling.length;
    const result = await withDeadline(
      probe.client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'What is six times seven?', maxTokens: 21 } }),
      15_000,
      'trigger-sampling-request',
    );
    assert.equal(probe.sampling.length, before + 1);
    assert.equal(probe.sampling.at(-1)!.maxTokens, 21);
    const text = textOf(result);
    assert.ok(text.includes(SAMPLED_TEXT) && text.includes(SAMPLED_MODEL), text);
  });

  test('notifications: progress on the answer stream, log messages on the session stream', async () => {
    const probe = p();
    const seen: Progress[] = [];
    const mark = probe.transport.frames.length;
    const result = await withDeadline(
      probe.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, { onprogress: (x) => seen.push(x) }),
      15_000,
      'trigger-long-running-operation',
    );
    assert.match(textOf(result), /Long running operation completed/);
    assert.deepEqual(
      seen.map((x) => x.progress),
      [1, 2, 3],
    );
    // On the wire: the three progress frames, in order, before the result frame.
    const kinds = probe.transport.frames
      .slice(mark)
      .map((f) => JSON.parse(f) as { method?: string; result?: unknown; params?: { progress?: number } })
      .map((m) => (m.method === 'notifications/progress' ? `progress ${m.params?.progress}` : m.result ? 'result' : String(m.method)));
    assert.deepEqual(kinds, ['progress 1', 'progress 2', 'progress 3', 'result']);

    // Simulated logging runs outside any request: it travels on the GET stream the bridge follows.
    await probe.client.setLoggingLevel('debug');
    const start = probe.logs.length;
    const on = await probe.client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
    assert.match(textOf(on), /Started simulated/);
    try {
      await waitFor('a notifications/message', () => probe.logs.slice(start).find((l) => /level[- ]message/i.test(String(l.data))));
    } finally {
      await probe.client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
    }
  });

  test('requests are not serialized: a short call completes while a long one is in flight', async () => {
    const { client } = p();
    let longDone = false;
    const long = client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 3, steps: 3 } }).then((r) => {
      longDone = true;
      return r;
    });
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'overtaking' } });
    assert.equal(textOf(echo), 'Echo: overtaking');
    assert.equal(longDone, false, 'the echo waited for the long call');
    await withDeadline(long, 15_000, 'the long call');
  });

  test('many calls in flight on one connection: each answered, and no listener-leak warning', async () => {
    // Each loopback request in flight holds one abort listener on the connection's signal
    // until its answer ends; sixteen at once are concurrency, not a leak, and must not make
    // Node print a MaxListenersExceededWarning into the gateway's log.
    const warnings = watchListenerWarnings();
    const probe16 = await connect(wsUrl(gateway, '/ws/mcp/everything'), alice);
    try {
      const calls = Array.from({ length: 16 }, (_, i) => probe16.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } }).then(() => i));
      assert.deepEqual(await withDeadline(Promise.all(calls), 30_000, 'sixteen calls at once'), Array.from({ length: 16 }, (_, i) => i));
      assert.deepEqual(await warnings.messages(), []);
    } finally {
      warnings.stop();
      await probe16.client.close().catch(() => {});
    }
  });

  test('an invalid JSON frame or a binary frame gets an error frame, and the connection stays usable', async () => {
    const { client, transport } = p();
    const before = transport.frames.length;
    transport.sendRaw('{"jsonrpc": "2.0", "id": 7, "method": ');
    const parseError = await waitFor('the parse error frame', () => transport.frames.slice(before).find((f) => f.includes('-32700')));
    assert.deepEqual(JSON.parse(parseError), { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: body is not valid JSON' } });

    const mark = transport.frames.length;
    transport.sendRaw(Buffer.from('{"jsonrpc":"2.0","id":8,"method":"ping"}'), true);
    const binary = JSON.parse(await waitFor('the binary frame error', () => transport.frames.slice(mark).find((f) => f.includes('-32600'))));
    assert.equal(binary.error.code, -32600);
    assert.match(binary.error.message, /binary frames are not supported/);

    const mark2 = transport.frames.length;
    transport.sendRaw(JSON.stringify({ jsonrpc: '1.0', id: 9, method: 'ping' }));
    const invalid = JSON.parse(await waitFor('the invalid request frame', () => transport.frames.slice(mark2).find((f) => f.includes('-32600'))));
    assert.equal(invalid.id, 9);

    assert.deepEqual(await client.ping(), {});
    const echo = await client.callTool({ name: 'echo', arguments: { message: 'still here' } });
    assert.equal(textOf(echo), 'Echo: still here');
  });

  test('closing the socket ends the gateway session', async () => {
    const other = await connect(wsUrl(gateway, '/ws/mcp/everything'), alice);
    const session = store.created.at(-1)!;
    assert.equal(await httpPing(gateway, '/mcp/everything', alice, session.sessionId), 200, 'the session is usable over HTTP while the socket is open');
    const count = await gateway.app.mcp.store.countSessions();
    const openSockets = async () => Number(/^switchboard_websocket_connections_open (\d+)$/m.exec(await gateway.app.metrics.registry.metrics())?.[1]);
    const socketsBefore = await openSockets();
    assert.ok(socketsBefore >= 1, 'the open connection is counted');
    await other.client.close();
    await waitFor('the session to be deleted', async () => ((await gateway.app.mcp.store.countSessions()) === count - 1 ? true : undefined));
    assert.equal(await httpPing(gateway, '/mcp/everything', alice, session.sessionId), 404);
    assert.equal(await openSockets(), socketsBefore - 1, 'and no longer counted once closed');
  });

  test('a client that stops reading is disconnected (1008) instead of making the gateway buffer without bound', { timeout: 60_000 }, async () => {
    const socket = new WebSocket(wsUrl(gateway, '/ws/mcp/everything'), 'mcp', { headers: { authorization: `Bearer ${alice}` } });
    const frames: string[] = [];
    socket.on('message', (data) => frames.push(String(data)));
    const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    socket.send(JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'slow-reader', version: '1' } } }));
    await waitFor('the initialize answer', () => (frames.length ? true : undefined));
    const session = store.created.at(-1)!;
    socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    // Stop reading, then ask for far more than MAX_UNREAD_BYTES (16 MiB) of answers.
    (socket as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
    const big = 'x'.repeat(1024 * 1024);
    for (let i = 1; i <= 40; i++) socket.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'echo', arguments: { message: big } } }));
    // Until the gateway gives up on the connection: closing it with 1008 ends its session. (A
    // fixed pause was too short on a loaded machine: the answers had not all been queued yet.)
    await waitFor('the gateway to give up on the reader that stopped (its session deleted)', async () => ((await httpPing(gateway, '/mcp/everything', alice, session.sessionId)) === 404 ? true : undefined), 30_000);
    (socket as unknown as { _socket: { resume(): void } })._socket.resume();
    const { code, reason } = await withDeadline(closed, 30_000, 'the gateway to close the slow connection');
    assert.equal(code, 1008);
    assert.match(reason, /not reading/);
    assert.ok(frames.length < 41, `not every answer was queued (${frames.length} frames)`);
  });

  test("a second user cannot use the first user's session", async () => {
    const session = store.created.find((s) => s.record.backend === 'everything' && s.userKey === store.created[0]!.userKey)!;
    // Over HTTP: another user's token with that session id is "not found".
    assert.equal(await httpPing(gateway, '/mcp/everything', bob, session.sessionId), 404);
    // Over WebSocket a client cannot name a session at all: an Mcp-Session-Id on the upgrade
    // is ignored, and bob's connection gets a session of his own.
    const created = store.created.length;
    const bobs = await connect(wsUrl(gateway, '/ws/mcp/everything'), bob, { 'mcp-session-id': session.sessionId });
    try {
      assert.equal(store.created.length, created + 1);
      const bobSession = store.created.at(-1)!;
      assert.notEqual(bobSession.sessionId, session.sessionId);
      assert.notEqual(bobSession.userKey, session.userKey);
      const echo = await bobs.client.callTool({ name: 'echo', arguments: { message: 'bob' } });
      assert.equal(textOf(echo), 'Echo: bob');
    } finally {
      await bobs.client.close();
    }
    // alice's session is still hers and alive.
    assert.equal(await httpPing(gateway, '/mcp/everything', alice, session.sessionId), 200);
  });

  describe('refused handshakes (answered over HTTP, before any upgrade)', () => {
    test('no token: 401 with the same WWW-Authenticate as the HTTP endpoint', async () => {
      const answer = await handshake(wsUrl(gateway, '/ws/mcp/everything'), {});
      assert.equal(answer.status, 401);
      const http = await fetch(`${gateway.url}/mcp/everything`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
      await http.body?.cancel();
      assert.equal(http.status, 401);
      assert.equal(answer.headers['www-authenticate'], http.headers.get('www-authenticate'));
      assert.equal(answer.headers['www-authenticate'], `Bearer resource_metadata="${gateway.url}/.well-known/oauth-protected-resource/mcp/everything"`);
      const aggregated = await handshake(wsUrl(gateway, '/ws/mcp'), {});
      assert.equal(aggregated.status, 401);
      assert.equal(aggregated.headers['www-authenticate'], `Bearer resource_metadata="${gateway.url}/.well-known/oauth-protected-resource/mcp"`);
    });

    test('a bad token: 401', async () => {
      const forged = `${alice.slice(0, -4)}AAAA`;
      const wrongAudience = await oauth!.token({ sub: 'ws-alice', aud: 'https://elsewhere.example/mcp' });
      const expired = await oauth!.token({ sub: 'ws-alice', aud: gateway.audience, expiresIn: -120 });
      for (const token of [forged, wrongAudience, expired, 'not-a-jwt']) {
        const answer = await handshake(wsUrl(gateway, '/ws/mcp/everything'), { authorization: `Bearer ${token}` });
        assert.equal(answer.status, 401, token);
        assert.match(String(answer.headers['www-authenticate']), /^Bearer /);
      }
    });

    test('a token in the query string alone: 401', async () => {
      for (const name of ['access_token', 'token', 'authorization']) {
        const answer = await handshake(wsUrl(gateway, `/ws/mcp/everything?${name}=${encodeURIComponent(alice)}`), {});
        assert.equal(answer.status, 401, name);
      }
    });

    test('a handshake that does not offer the subprotocol "mcp": 400; "mcp" among others is chosen', async () => {
      const headers = { authorization: `Bearer ${alice}` };
      for (const protocols of [['graphql-ws'], []]) {
        const answer = await handshake(wsUrl(gateway, '/ws/mcp/everything'), headers, protocols);
        assert.equal(answer.status, 400, JSON.stringify(protocols));
        assert.match(JSON.parse(answer.body).error.message, /subprotocol "mcp"/);
      }
      const chosen = await handshake(wsUrl(gateway, '/ws/mcp/everything'), headers, ['graphql-ws', 'mcp']);
      assert.equal(chosen.status, 101);
      assert.equal(chosen.protocol, 'mcp');
    });

    test('unknown backend: 404; foreign Origin: 403; foreign Host: 421; access policy: 403; plain GET without upgrade: 426', async () => {
      const headers = { authorization: `Bearer ${alice}` };
      assert.equal((await handshake(wsUrl(gateway, '/ws/mcp/nope'), headers)).status, 404);
      assert.equal((await handshake(wsUrl(gateway, '/ws/mcp/everything'), { ...headers, origin: 'https://evil.example' })).status, 403);
      assert.equal((await handshake(wsUrl(gateway, '/ws/mcp/everything'), { ...headers, host: 'evil.example' })).status, 421);
      const denied = await handshake(wsUrl(gateway, '/ws/mcp/restricted'), headers);
      assert.equal(denied.status, 403);
      assert.equal(JSON.parse(denied.body).error.code, -32015);
      const plain = await fetch(`${gateway.url}/ws/mcp/everything`, { headers });
      assert.equal(plain.status, 426);
      assert.equal(plain.headers.get('upgrade'), 'websocket');
      await plain.body?.cancel();
    });
  });

  test('a frame larger than limits.maxBodyBytes closes the connection with 1009', async () => {
    const raw = new WebSocket(wsUrl(gateway, '/ws/mcp/everything'), 'mcp', { headers: { authorization: `Bearer ${alice}` } });
    await new Promise<void>((resolve, reject) => {
      raw.once('open', () => resolve());
      raw.once('error', reject);
    });
    const closed = new Promise<number>((resolve) => raw.once('close', (code) => resolve(code)));
    raw.on('error', () => {});
    raw.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(gateway.config.limits.maxBodyBytes) } }));
    assert.equal(await withDeadline(closed, 5_000, 'the close'), 1009);
  });

  test('the aggregated endpoint over WebSocket: /ws/mcp', async () => {
    const agg = await connect(wsUrl(gateway, '/ws/mcp'), alice);
    try {
      const { tools } = await agg.client.listTools();
      const echo = tools.find((x) => x.name.endsWith('echo'));
      assert.ok(echo, tools.map((x) => x.name).join(', '));
      assert.equal(echo.name, 'everything__echo');
      const result = await agg.client.callTool({ name: echo.name, arguments: { message: 'aggregated' } });
      assert.equal(textOf(result), 'Echo: aggregated');
    } finally {
      await agg.client.close();
    }
  });
});

describe('MCP over WebSocket: the connection ends with the session, the token, the server', () => {
  let gateway: GatewayHandle;
  const store = new RecordingStore();
  let closedByTest = false;

  before(async () => {
    const port = await freePort();
    gateway = await startGateway({
      issuer: oauth!.issuer,
      backends: [{ name: 'everything', url: everything!.url, timeout: '30s' }],
      store,
      port,
      // No leeway, so that a token can expire during the test.
      overrides: { auth: { issuer: oauth!.issuer, audience: `http://127.0.0.1:${port}/mcp`, algorithms: ['RS256', 'ES256'], clockTolerance: '0s' } },
    });
  });

  after(async () => {
    if (!closedByTest) await gateway?.close();
  });

  test('the session deleted elsewhere: the socket closes with 1008 and says why', async () => {
    const token = await oauth!.token({ sub: 'ws-dave', aud: gateway.audience });
    const probe = await connect(wsUrl(gateway, '/ws/mcp/everything'), token);
    const { sessionId } = store.created.at(-1)!;
    // The bridge follows the session's GET stream; give it a moment to open.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const res = await fetch(`${gateway.url}/mcp/everything`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    });
    assert.equal(res.status, 204);
    await withDeadline(probe.transport.closed(), 10_000, 'the socket to close');
    assert.equal(probe.transport.closeCode, 1008);
    assert.match(probe.transport.closeReason, /session not found/);
  });

  test('a token that expires during the connection: the request gets an error frame, then 1008', async () => {
    const token = await oauth!.token({ sub: 'ws-erin', aud: gateway.audience, expiresIn: 3 });
    const probe = await connect(wsUrl(gateway, '/ws/mcp/everything'), token);
    assert.deepEqual(await probe.client.ping(), {});
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    await assert.rejects(probe.client.callTool({ name: 'echo', arguments: { message: 'too late' } }), /HTTP 401|Connection closed/);
    await withDeadline(probe.transport.closed(), 5_000, 'the socket to close');
    assert.equal(probe.transport.closeCode, 1008);
    assert.match(probe.transport.closeReason, /token/);
    const frame = probe.transport.frames.map((f) => JSON.parse(f) as { error?: { data?: { status?: number } } }).find((m) => m.error?.data?.status === 401);
    assert.ok(frame, `an error frame with data.status 401 among ${JSON.stringify(probe.transport.frames.slice(-3))}`);
  });

  test('server shutdown: open connections are closed with 1001 and the server stops promptly', async () => {
    const token = await oauth!.token({ sub: 'ws-frank', aud: gateway.audience });
    const probe = await connect(wsUrl(gateway, '/ws/mcp/everything'), token);
    await probe.client.callTool({ name: 'echo', arguments: { message: 'before shutdown' } });
    closedByTest = true;
    const started = Date.now();
    await withDeadline(gateway.close(), 10_000, 'gateway.close()');
    await withDeadline(probe.transport.closed(), 5_000, 'the socket to close');
    assert.equal(probe.transport.closeCode, 1001);
    assert.ok(Date.now() - started < 8_000, `closing took ${Date.now() - started} ms`);
  });
});

describe('MCP over WebSocket with the Redis store', () => {
  let redis: RedisHandle | undefined;
  let gateway: GatewayHandle | undefined;
  let inspect: Redis | undefined;

  before(async () => {
    redis = await startRedis();
    gateway = await startGateway({ issuer: oauth!.issuer, backends: [{ name: 'everything', url: everything!.url, timeout: '30s' }], redisUrl: redis.url });
    inspect = new Redis(redis.url, { maxRetriesPerRequest: 0, lazyConnect: true });
    inspect.on('error', () => {});
    await inspect.connect();
  });

  after(async () => {
    inspect?.disconnect();
    await gateway?.close();
    await redis?.stop();
  });

  test('the session lives in Redis while the socket is open and is gone after it closes', async () => {
    assert.equal(gateway!.app.mcp.store.kind, 'redis');
    const token = await oauth!.token({ sub: 'ws-carol', aud: gateway!.audience });
    const pattern = `${gateway!.config.redis!.keyPrefix}s:*`;
    const before = await inspect!.keys(pattern);
    const probe = await connect(wsUrl(gateway!, '/ws/mcp/everything'), token);
    const echo = await probe.client.callTool({ name: 'echo', arguments: { message: 'via redis' } });
    assert.equal(textOf(echo), 'Echo: via redis');
    const added = (await inspect!.keys(pattern)).filter((k) => !before.includes(k));
    assert.equal(added.length, 1, `one new session key: ${JSON.stringify(added)}`);
    const sessionId = added[0]!.split(':').at(-1)!;
    assert.equal(await httpPing(gateway!, '/mcp/everything', token, sessionId), 200);
    await probe.client.close();
    await waitFor('the session key to go', async () => ((await inspect!.exists(added[0]!)) === 0 ? true : undefined));
    assert.equal(await httpPing(gateway!, '/mcp/everything', token, sessionId), 404);
  });
});
