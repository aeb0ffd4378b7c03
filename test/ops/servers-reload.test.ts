/**
 * Virtual servers (`servers`, issue 31 §1) and member removal on a config reload (issue 32 §1,
 * docs/operations-reload.md), on two real gateway replicas sharing a real Redis, each reading
 * its own ConfigMap-style mount changed by the kubelet's `..data` swap (no signal). Backends are
 * real SDK servers (test/fixtures/announcing-backend.ts). Sessions start on one replica and
 * their standalone streams are held by the other, so a notification proves that replica
 * applied its own file.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { sessionToolNames } from '../helpers/pages.js';
import { startTestRedis, type TestRedis } from '../helpers/redis-topology.js';
import { eventually, openStream, RELOAD_WAIT_MS, startReloadingReplicas, untilEnd, untilMessage, type ReloadingReplicas } from '../helpers/reload-replicas.js';
import { messageOf, SseReader } from '../helpers/sse-client.js';
import { sessionClient } from '../helpers/session-client.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

let redis: TestRedis;
let oauth: OAuthHandle;
let alpha: FixtureChild;
let beta: FixtureChild;
let gamma: FixtureChild;
let mounted: ReloadingReplicas;
let token: string;
let backends: Array<{ name: string; url: string }>;

before(async () => {
  [redis, oauth] = await Promise.all([startTestRedis(), startOAuthServer()]);
  [alpha, beta, gamma] = await Promise.all([startFixtureChild('announcing-backend.ts'), startFixtureChild('announcing-backend.ts'), startFixtureChild('announcing-backend.ts')]);
  backends = [
    { name: 'alpha', url: alpha.url },
    { name: 'beta', url: beta.url },
    { name: 'gamma', url: gamma.url },
  ];
  mounted = await startReloadingReplicas({ count: 2, redis: redis.config, issuer: oauth.issuer, backends });
  token = await oauth.token({ sub: 'servers-reload-user', aud: mounted.set.audience });
});

after(async () => {
  await mounted?.stop();
  await Promise.allSettled([alpha, beta, gamma].map((b) => b?.child.stop()).concat([oauth?.stop(), redis?.stop()]));
});

const endpoint = (replica: number, name?: string) => (name ? mounted.set.endpoint(replica, name) : new URL(`${mounted.set.replicas[replica]!.url}/mcp`));
const client = (replica: number, name?: string) => sessionClient(() => endpoint(replica, name), 'servers-reload-test');
const metadataStatus = async (replica: number, name: string) => (await fetch(`${mounted.set.replicas[replica]!.url}/.well-known/oauth-protected-resource/mcp/${name}`)).status;
const tools = (replica: number, name: string | undefined, session: string) => sessionToolNames(client(replica, name), token, session);
const desk = (...tools: Array<{ from: string; as: string }>) => [{ name: 'desk', title: 'Front desk', tools }];

/**
 * A 2026-07-28 client's `subscriptions/listen` (no session, no GET stream), past its
 * acknowledgement: it hears a reload's list changes only through streams/open-listens.ts.
 */
async function listen(replica: number, name: string | undefined, id: string, notifications: Record<string, boolean>): Promise<SseReader> {
  const res = await fetch(endpoint(replica, name), {
    method: 'POST',
    headers: statelessHeaders(token, 'subscriptions/listen'),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } }),
  });
  assert.equal(res.headers.get('content-type'), 'text/event-stream', `listen: HTTP ${res.status}`);
  const events = new SseReader(res);
  assert.equal(messageOf((await events.next(RELOAD_WAIT_MS))!)?.method, 'notifications/subscriptions/acknowledged');
  return events;
}

const taggedWith = (id: string) => (message: Record<string, unknown>) => (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta?.['io.modelcontextprotocol/subscriptionId'] === id;

async function call(replica: number, name: string, session: string, tool: string, text: string): Promise<string> {
  const res = await client(replica, name).post(token, { jsonrpc: '2.0', id: text, method: 'tools/call', params: { name: tool, arguments: { text } } }, session);
  assert.equal(res.status, 200);
  return res.text();
}

describe('virtual servers and member removal reload on two replicas', () => {
  let deskSession: string;
  let deskStream: SseReader;
  let mcpSession: string;
  let mcpStream: SseReader;
  let mcpListen: SseReader;
  let promptsListen: SseReader;

  test('a server added by the swap is served on both replicas, with its RFC 9728 resource', async () => {
    assert.equal(await metadataStatus(0, 'desk'), 404);
    await mounted.swapAll({ servers: desk({ from: 'alpha.announce', as: 'shout' }) });
    await mounted.allCount('applied', 1);
    for (const replica of [0, 1]) assert.equal(await metadataStatus(replica, 'desk'), 200);
    const doc = (await (await fetch(`${mounted.set.replicas[1]!.url}/.well-known/oauth-protected-resource/mcp/desk`)).json()) as { resource: string };
    assert.equal(doc.resource, `${mounted.set.audience}/desk`);

    deskSession = await client(0, 'desk').initialize(token);
    assert.deepEqual(await tools(1, 'desk', deskSession), ['shout']);
    assert.match(await call(1, 'desk', deskSession, 'shout', 'hello-desk'), /announced hello-desk/);
  });

  test('a changed server keeps its sessions: the open stream (other replica) hears tools/list_changed, the next lists show the new selection', async () => {
    mcpSession = await client(0).initialize(token);
    assert.deepEqual(await tools(0, undefined, mcpSession), ['alpha__announce', 'beta__announce', 'gamma__announce']);
    [deskStream, mcpStream] = await Promise.all([openStream(endpoint(1, 'desk'), token, deskSession), openStream(endpoint(1), token, mcpSession)]);
    const deskListen = await listen(1, 'desk', 'desk-listen', { toolsListChanged: true });
    [mcpListen, promptsListen] = await Promise.all([listen(1, undefined, 'mcp-listen', { toolsListChanged: true }), listen(1, undefined, 'prompts-listen', { promptsListChanged: true })]);

    await mounted.swapAll({ servers: desk({ from: 'alpha.announce', as: 'shout' }, { from: 'beta.announce', as: 'yell' }) });
    await mounted.allCount('applied', 2);
    await untilMessage(deskStream, 'notifications/tools/list_changed');
    // A 2026-07-28 client's listen on the changed server hears it too, tagged as its own.
    await untilMessage(deskListen, 'notifications/tools/list_changed', taggedWith('desk-listen'));
    await deskListen.cancel();
    // beta joins the session on its next message (aggregate/rejoin.ts), in the background.
    await eventually('the new member to be listed', async () => (await tools(0, 'desk', deskSession)).join() === 'shout,yell', mounted.logs);
    assert.match(await call(1, 'desk', deskSession, 'yell', 'hello-yell'), /announced hello-yell/);
  });

  test('a removed backend: /mcp sessions and the virtual server that had it hear list_changed on the other replica; their lists lack it', async () => {
    const betaListen = await listen(1, 'beta', 'beta-listen', { toolsListChanged: true });
    await mounted.swapAll({ backends: backends.filter((b) => b.name !== 'beta'), servers: desk({ from: 'alpha.announce', as: 'shout' }) });
    await mounted.allCount('applied', 3);
    // A 2026-07-28 listen on the removed backend's own endpoint ends as a server ends one: its result, tagged, then the end.
    let last: Record<string, unknown> | undefined;
    for (let event = await betaListen.next(RELOAD_WAIT_MS); event; event = await betaListen.next(RELOAD_WAIT_MS)) last = event.data ? messageOf(event) : last;
    assert.deepEqual(last, { jsonrpc: '2.0', id: 'beta-listen', result: { _meta: { 'io.modelcontextprotocol/subscriptionId': 'beta-listen' } } });
    await Promise.all([untilMessage(mcpStream, 'notifications/tools/list_changed'), untilMessage(deskStream, 'notifications/tools/list_changed')]);
    // A 2026-07-28 listen on /mcp hears it as well; one that asked only for prompts hears no tools notice.
    await untilMessage(mcpListen, 'notifications/tools/list_changed', taggedWith('mcp-listen'));
    await assert.rejects(promptsListen.next(500), /no SSE event within 500 ms/);
    await Promise.all([mcpListen.cancel(), promptsListen.cancel()]);
    for (const replica of [0, 1]) {
      assert.deepEqual(await tools(replica, undefined, mcpSession), ['alpha__announce', 'gamma__announce']);
      assert.deepEqual(await tools(replica, 'desk', deskSession), ['shout']);
    }
    const refused = await call(0, 'desk', deskSession, 'yell', 'gone');
    assert.match(refused, /Unknown tool: yell/);
  });

  test('a removed server: its open stream (followed from the other replica) ends, its sessions get 404, its metadata is gone; /mcp is untouched', async () => {
    await mounted.swapAll({ backends: backends.filter((b) => b.name !== 'beta'), servers: [] });
    await mounted.allCount('applied', 4);
    // The stream is read on replica 0 (opened ahead after initialize, mcp/standalone-early.ts) and followed here over the store: it ends here too.
    const events = await untilEnd(deskStream);
    // (What is left unread before its end is only earlier list_changed: the reload's and the late member's, aggregate/rejoin.ts.)
    assert.ok(events.every((e) => !e.data || e.data.includes('list_changed')), `nothing else was sent on it: ${JSON.stringify(events)}`);
    for (const replica of [0, 1]) {
      assert.equal(await client(replica, 'desk').pingStatus(token, deskSession), 404);
      assert.equal(await metadataStatus(replica, 'desk'), 404);
      assert.equal(await client(replica).pingStatus(token, mcpSession), 200);
    }
    await mcpStream.cancel();
  });

  test('a server added with discovery is served under tool search, as one configured at start (mcp/build-context.ts virtualServerEndpoint)', async () => {
    const lookup = { name: 'lookup', tools: [{ from: 'alpha.announce', as: 'shout' }, { from: 'gamma.announce', as: 'yell' }], discovery: { threshold: 1 } };
    await mounted.swapAll({ backends: backends.filter((b) => b.name !== 'beta'), servers: [lookup] });
    await mounted.allCount('applied', 5);
    const session = await client(0, 'lookup').initialize(token);
    assert.deepEqual((await tools(1, 'lookup', session)).sort(), ['call_tool', 'search_tools']);
    assert.match(await call(1, 'lookup', session, 'yell', 'found-directly'), /announced found-directly/);
  });
});
