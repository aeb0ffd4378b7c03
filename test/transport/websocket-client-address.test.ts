/**
 * A WebSocket client is judged by its own address and headers (issue 41 §3): every message of
 * `/ws/mcp/{backend}` is re-posted to `/mcp/{backend}` over loopback, and the HTTP path must
 * see the client behind it — `source.address` and `request.headers` in policy rules, the
 * access log's `remoteAddress`, `listen.trustProxy` with X-Forwarded-For — exactly as it sees
 * an HTTP client, while no client can name an address by sending the bridge's header itself.
 *
 * Real parts: the OAuth server process, the bank backend (test/fixtures/bank-backend.ts), an
 * in-process gateway with `policy.rules`, the SDK's Client over HTTP and over WebSocket. The
 * clients bind their sockets to 127.0.0.2 or 127.0.0.3 (Linux routes all of 127/8 to lo), so
 * their address differs from the gateway's own loopback requests (127.0.0.1).
 */
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { FastifyRequest } from 'fastify';
import { Agent, fetch as undiciFetch } from 'undici';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { BRIDGE_HEADER, BridgedClients } from '../../src/transport/bridged-clients.js';
import { startBankBackend, type BankBackend } from '../fixtures/bank-backend.js';
import { withDeadline } from '../helpers/deadline.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { captureLogLines, type LogLines } from '../helpers/log-lines.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { WsTransport } from '../helpers/ws-transport.js';

const RULES: Array<{ name: string; effect: 'allow' | 'deny'; when: string }> = [
  { name: 'no-wipe-from-127.0.0.2', effect: 'deny', when: 'mcp.tool.name == "delete_account" && source.address == "127.0.0.2"' },
  { name: 'no-wipe-from-203.0.113.7', effect: 'deny', when: 'mcp.tool.name == "delete_account" && source.address == "203.0.113.7"' },
  { name: 'red-team-lists-nothing', effect: 'deny', when: 'mcp.tool.name == "list_accounts" && "x-team" in request.headers && request.headers["x-team"] == "red"' },
  { name: 'bridge-header-unseen', effect: 'deny', when: `mcp.tool.name == "transfer" && "${BRIDGE_HEADER}" in request.headers` },
];

let oauth: OAuthHandle | undefined;
let bank: BankBackend | undefined;
/** A token for each gateway (its audience). */
const tokens = new Map<GatewayHandle, string>();
const clients: Client[] = [];
const agents: Agent[] = [];

before(async () => {
  [oauth, bank] = await Promise.all([startOAuthServer(), startBankBackend('legacy')]);
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled(agents.map((a) => a.close()));
  await Promise.allSettled([oauth?.stop(), bank?.close()]);
});

async function startRuledGateway(logs: LogLines, trustProxy?: string[]): Promise<GatewayHandle> {
  const port = await freePort();
  const gateway = await startGateway({
    port,
    issuer: oauth!.issuer,
    backends: [{ name: 'bank', url: bank!.url, protocol: '2025-11-25' }],
    overrides: { listen: { host: '127.0.0.1', port, ...(trustProxy ? { trustProxy } : {}) }, log: { level: 'info' }, policy: { rules: RULES } },
    logStream: logs.stream,
  });
  tokens.set(gateway, await oauth!.token({ sub: 'ws-address', aud: gateway.audience }));
  return gateway;
}

interface From {
  /** The client socket's address. */
  local: string;
  headers?: Record<string, string>;
}

async function overHttp(gateway: GatewayHandle, from: From): Promise<Client> {
  const agent = new Agent({ localAddress: from.local });
  agents.push(agent);
  const fetch = ((url: string | URL, init?: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: agent })) as unknown as typeof globalThis.fetch;
  const headers = { authorization: `Bearer ${tokens.get(gateway)}`, ...from.headers };
  const client = new Client({ name: 'address-http', version: '1.0.0' });
  await withDeadline(client.connect(new StreamableHTTPClientTransport(gateway.endpoint('bank'), { fetch, requestInit: { headers } })), 10_000, 'connect over HTTP');
  clients.push(client);
  return client;
}

async function overWebSocket(gateway: GatewayHandle, from: From): Promise<Client> {
  const url = `${gateway.url.replace(/^http/, 'ws')}/ws/mcp/bank`;
  const client = new Client({ name: 'address-ws', version: '1.0.0' });
  await withDeadline(client.connect(new WsTransport(url, { authorization: `Bearer ${tokens.get(gateway)}`, ...from.headers }, { localAddress: from.local })), 10_000, 'connect over WebSocket');
  clients.push(client);
  return client;
}

/** 'ran' when the call reached the bank, 'refused' when the gateway refused it. */
async function outcome(client: Client, tool: string): Promise<'ran' | 'refused'> {
  const before = bank!.calls.length;
  try {
    await client.callTool({ name: tool, arguments: {} });
  } catch (err) {
    assert.ok(err instanceof McpError, `a JSON-RPC refusal, not ${String(err)}`);
    assert.equal(bank!.calls.length, before, 'a refused call never reaches the backend');
    return 'refused';
  }
  assert.deepEqual(bank!.calls.slice(before), [tool]);
  return 'ran';
}

/** The access lines of `/mcp/bank` written since `from`. */
function accessLines(logs: LogLines, from: number): Array<{ req: { method: string; remoteAddress?: string }; rpc?: string }> {
  return logs.lines
    .slice(from)
    .map((l) => JSON.parse(l) as { msg: string; route?: string; req: { method: string; remoteAddress?: string }; rpc?: string })
    .filter((l) => l.msg === 'request completed' && l.route === '/mcp/:backend');
}

async function waitFor<T>(what: string, check: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 8_000;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('policy rules, the access log and the bridge header over WebSocket', () => {
  const logs = captureLogLines();
  let gateway: GatewayHandle;

  before(async () => {
    gateway = await startRuledGateway(logs);
  });
  after(() => gateway?.close());

  test('source.address: a rule on 127.0.0.2 refuses the call over HTTP and over /ws/mcp/{b} alike', async () => {
    assert.equal(await outcome(await overHttp(gateway, { local: '127.0.0.2' }), 'delete_account'), 'refused', 'HTTP from 127.0.0.2');
    assert.equal(await outcome(await overWebSocket(gateway, { local: '127.0.0.2' }), 'delete_account'), 'refused', 'WebSocket from 127.0.0.2');
    assert.equal(await outcome(await overWebSocket(gateway, { local: '127.0.0.3' }), 'delete_account'), 'ran', 'WebSocket from another address');
  });

  test("request.headers: a rule sees the WebSocket upgrade request's headers", async () => {
    assert.equal(await outcome(await overHttp(gateway, { local: '127.0.0.3', headers: { 'x-team': 'red' } }), 'list_accounts'), 'refused', 'HTTP, x-team red');
    assert.equal(await outcome(await overWebSocket(gateway, { local: '127.0.0.3', headers: { 'x-team': 'red' } }), 'list_accounts'), 'refused', 'WebSocket, x-team red');
    assert.equal(await outcome(await overWebSocket(gateway, { local: '127.0.0.3', headers: { 'x-team': 'blue' } }), 'list_accounts'), 'ran', 'WebSocket, x-team blue');
  });

  test("the access log names the WebSocket client's address on every line of its connection, the session's DELETE included", async () => {
    const from = logs.lines.length;
    const client = await overWebSocket(gateway, { local: '127.0.0.2' });
    assert.equal(await outcome(client, 'transfer'), 'ran');
    await client.close();
    await waitFor('the DELETE that ends the session', () => accessLines(logs, from).find((l) => l.req.method === 'DELETE'));
    const lines = accessLines(logs, from);
    assert.ok(lines.some((l) => l.rpc === 'tools/call'), JSON.stringify(lines));
    assert.deepEqual([...new Set(lines.map((l) => l.req.remoteAddress))], ['127.0.0.2'], JSON.stringify(lines));
  });

  test('the bridge header sent by a client itself names nothing: the address stays, and no rule sees it', async () => {
    const forged = { [BRIDGE_HEADER]: 'A'.repeat(43) };
    const http = await overHttp(gateway, { local: '127.0.0.2', headers: forged });
    assert.equal(await outcome(http, 'delete_account'), 'refused', 'still 127.0.0.2');
    assert.equal(await outcome(http, 'transfer'), 'ran', 'the header was taken off before the rules');
    const ws = await overWebSocket(gateway, { local: '127.0.0.2', headers: forged });
    assert.equal(await outcome(ws, 'delete_account'), 'refused', 'still 127.0.0.2');
    assert.equal(await outcome(ws, 'transfer'), 'ran', 'an upgrade header of that name is not carried');
  });
});

describe('listen.trustProxy applies to the WebSocket upgrade as to HTTP', () => {
  const logs = captureLogLines();
  let gateway: GatewayHandle;
  const xff = { 'x-forwarded-for': '203.0.113.7' };

  before(async () => {
    gateway = await startRuledGateway(logs, ['127.0.0.2']);
  });
  after(() => gateway?.close());

  test('X-Forwarded-For from the trusted proxy names the client, over HTTP and over WebSocket', async () => {
    assert.equal(await outcome(await overHttp(gateway, { local: '127.0.0.2', headers: xff }), 'delete_account'), 'refused', 'HTTP');
    const from = logs.lines.length;
    assert.equal(await outcome(await overWebSocket(gateway, { local: '127.0.0.2', headers: xff }), 'delete_account'), 'refused', 'WebSocket');
    assert.deepEqual([...new Set(accessLines(logs, from).map((l) => l.req.remoteAddress))], ['203.0.113.7']);
  });

  test('X-Forwarded-For from a client that is not a trusted proxy is not believed, over either', async () => {
    assert.equal(await outcome(await overHttp(gateway, { local: '127.0.0.3', headers: xff }), 'delete_account'), 'ran', 'HTTP');
    const from = logs.lines.length;
    assert.equal(await outcome(await overWebSocket(gateway, { local: '127.0.0.3', headers: xff }), 'delete_account'), 'ran', 'WebSocket');
    assert.deepEqual([...new Set(accessLines(logs, from).map((l) => l.req.remoteAddress))], ['127.0.0.3']);
  });
});

describe('BridgedClients', () => {
  /** A Fastify request as far as the carrier reads it. */
  function fakeRequest(ip: string, headers: IncomingHttpHeaders): FastifyRequest {
    const raw = { headers };
    return Object.create(
      {},
      { raw: { value: raw }, ip: { get: () => ip, configurable: true }, headers: { get: () => raw.headers } },
    ) as FastifyRequest;
  }

  test("a live token gives the request its client's address and upgrade headers, under the bridge's own; an unknown or released one gives nothing", () => {
    const clients = new BridgedClients();
    const upgrade = fakeRequest('198.51.100.4', {
      host: 'gw', authorization: 'Bearer t', 'x-team': 'red', 'user-agent': 'client/1', upgrade: 'websocket', connection: 'Upgrade',
      'sec-websocket-key': 'k', 'sec-websocket-protocol': 'mcp', 'mcp-session-id': 'forged', accept: 'text/html', [BRIDGE_HEADER]: 'forged',
    });
    const token = clients.admit(upgrade);
    assert.match(token, /^[A-Za-z0-9_-]{43}$/, '256 random bits');

    const bridged = fakeRequest('127.0.0.1', { host: 'gw', authorization: 'Bearer t', accept: 'application/json, text/event-stream', 'content-type': 'application/json', [BRIDGE_HEADER]: token });
    clients.adopt(bridged);
    assert.equal(bridged.ip, '198.51.100.4');
    assert.deepEqual(bridged.headers, { host: 'gw', authorization: 'Bearer t', 'x-team': 'red', 'user-agent': 'client/1', accept: 'application/json, text/event-stream', 'content-type': 'application/json' });

    const forged = fakeRequest('127.0.0.1', { host: 'gw', [BRIDGE_HEADER]: 'A'.repeat(43) });
    clients.adopt(forged);
    assert.equal(forged.ip, '127.0.0.1');
    assert.deepEqual(forged.headers, { host: 'gw' });

    clients.release(token);
    assert.equal(clients.size, 0);
    const late = fakeRequest('127.0.0.1', { host: 'gw', [BRIDGE_HEADER]: token });
    clients.adopt(late);
    assert.equal(late.ip, '127.0.0.1');
  });
});
