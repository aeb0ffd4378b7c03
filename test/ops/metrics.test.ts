/**
 * `/metrics` after real traffic (SPEC §6): request counters by route template, MCP message
 * counters and latency by backend and method, sessions and streams, auth failures and
 * backend errors — and never a user or session id in a label.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

let everything: EverythingHandle;
let oauth: OAuthHandle;
let gateway: GatewayHandle;

before(async () => {
  [everything, oauth] = await Promise.all([startEverything(), startOAuthServer()]);
  const deadPort = await freePort();
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [
      { name: 'everything', url: everything.url },
      { name: 'down', url: `http://127.0.0.1:${deadPort}/mcp`, timeout: '2s' },
    ],
  });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([everything?.stop(), oauth?.stop()]);
});

async function scrape(): Promise<string> {
  const res = await fetch(`${gateway.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  return res.text();
}

function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

test('metrics reflect MCP traffic, auth failures and backend errors without user or session labels', async () => {
  const token = await oauth.token({ sub: 'metrics-user-7f3a', aud: gateway.audience });
  const client = new Client({ name: 'metrics-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(gateway.endpoint('everything'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  await client.listTools();
  await client.callTool({ name: 'echo', arguments: { message: 'counted' } });
  const sessionId = transport.sessionId!;

  // An unauthenticated request and a backend that is down.
  assert.equal((await fetch(gateway.endpoint('everything'), { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status, 401);
  const down = new Client({ name: 'metrics-test', version: '1.0.0' });
  await assert.rejects(down.connect(new StreamableHTTPClientTransport(gateway.endpoint('down'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })));

  const text = await scrape();
  assert.ok((sample(text, 'switchboard_mcp_messages_total', { backend: 'everything', method: 'tools/call', outcome: 'relayed' }) ?? 0) >= 1, 'tools/call counted');
  assert.ok((sample(text, 'switchboard_mcp_messages_total', { backend: 'everything', method: 'initialize', outcome: 'relayed' }) ?? 0) >= 1, 'initialize counted');
  assert.ok((sample(text, 'switchboard_mcp_messages_total', { backend: 'down', method: 'initialize', outcome: 'backend_error' }) ?? 0) >= 1, 'failed initialize counted');
  assert.ok((sample(text, 'switchboard_mcp_request_duration_seconds_count', { backend: 'everything', method: 'tools/list' }) ?? 0) >= 1, 'latency histogram observed');
  assert.ok((sample(text, 'switchboard_backend_errors_total', { backend: 'down', reason: 'unreachable' }) ?? 0) >= 1, 'backend error counted');
  assert.ok((sample(text, 'switchboard_auth_failures_total', { reason: 'missing_token' }) ?? 0) >= 1, 'auth failure counted');
  assert.ok((sample(text, 'switchboard_http_requests_total', { method: 'POST', route: '/mcp/:backend', status: '200' }) ?? 0) >= 1, 'HTTP requests by route template');
  assert.ok((sample(text, 'switchboard_sessions_started_total', { backend: 'everything' }) ?? 0) >= 1);
  assert.ok((sample(text, 'switchboard_sessions_active', {}) ?? 0) >= 1, 'active sessions gauge');
  assert.ok(sample(text, 'switchboard_sse_streams_open', {}) !== undefined, 'open streams gauge');
  assert.ok(sample(text, 'process_cpu_user_seconds_total', {}) !== undefined, 'Node default metrics');

  assert.ok(!text.includes(sessionId), 'no session id in metrics');
  assert.ok(!text.includes('metrics-user-7f3a'), 'no user in metrics');

  await transport.terminateSession();
  await client.close();
  const afterDelete = await scrape();
  assert.ok((sample(afterDelete, 'switchboard_sessions_ended_total', { backend: 'everything', reason: 'deleted' }) ?? 0) >= 1);
});
