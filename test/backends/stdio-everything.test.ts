/**
 * The MCP reference server (`@modelcontextprotocol/server-everything`, its stdio transport) as a
 * stdio backend, spoken to directly by the gateway (src/backends/bridge/stdio-backend.ts), with
 * the official SDK client on `/mcp/{backend}`: a server the gateway's authors did not write,
 * using the features a stdio child sends unprompted — progress, a sampling request during a
 * call, list and resource traffic.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, test } from 'node:test';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { connectClient, textOf, type Connected } from './bridge-support.js';

const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

let oauth: OAuthHandle | undefined;
let gateway: GatewayHandle | undefined;
const clients: Connected[] = [];

before(async () => {
  oauth = await startOAuthServer();
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'everything', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], timeout: '20s' }] });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gateway?.close();
  await oauth?.stop();
});

test('the reference server over stdio: tools, progress, a sampling request during a call, resources and prompts', async () => {
  const token = await oauth!.token({ sub: 'everything-user', aud: gateway!.audience });
  const session = await connectClient(gateway!.endpoint('everything'), token, clients);
  const { client } = session;
  const tools = (await withDeadline(client.listTools(), 10_000, 'tools/list')).tools.map((t) => t.name);
  for (const name of ['echo', 'get-sum', 'trigger-long-running-operation', 'trigger-sampling-request']) assert.ok(tools.includes(name), `${name} in ${tools.join(', ')}`);

  assert.match(textOf(await withDeadline(client.callTool({ name: 'echo', arguments: { message: 'through stdio' } }), 10_000, 'echo')), /through stdio/);
  assert.match(textOf(await withDeadline(client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } }), 10_000, 'get-sum')), /5/);

  const progress: Progress[] = [];
  const long = await withDeadline(client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } }, undefined, { onprogress: (p) => void progress.push(p) }), 15_000, 'long-running');
  assert.match(textOf(long), /completed/i);
  assert.deepEqual(progress.map((p) => p.progress), [1, 2]);

  const sampled = await withDeadline(client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'a stdio question' } }), 15_000, 'sampling');
  // The server puts its own words before the prompt; the client's answer comes back in its result.
  assert.match(textOf(sampled), /reply to .*a stdio question/);
  assert.equal(session.sampled.length, 1);
  assert.match(session.sampled[0]!, /a stdio question/);

  assert.ok((await withDeadline(client.listResources(), 10_000, 'resources/list')).resources.length > 0);
  assert.ok((await withDeadline(client.listPrompts(), 10_000, 'prompts/list')).prompts.length > 0);
  await withDeadline(session.transport.terminateSession(), 10_000, 'DELETE');
});
