/**
 * stdio backends (SPEC §1, backend side) through the gateway: the official SDK client
 * speaks Streamable HTTP to `/mcp/{backend}` with a real JWT; the gateway reaches a local
 * bridge (src/backends/bridge/) that runs one child process per MCP session — the SDK
 * McpServer of test/fixtures/stdio-backend.ts.
 *
 * Checked: the whole conversation (tools, progress, sampling, resources); one child per
 * session, with the configured env and none of the gateway's; DELETE, a dying child,
 * idle expiry (`bridge.idleTimeout`) and gateway shutdown each end the child/session; a command that cannot
 * start, or exits at once, gives the client a clear JSON-RPC error promptly; a 2026-07-28
 * client (the v2 SDK) reaches the same child through the gateway's era bridge.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { CreateMessageRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { GATEWAY_SECRET_VAR } from '../fixtures/bridge-backend-tools.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { withDeadline } from '../helpers/deadline.js';
import { assertMcpError, connectClient, exerciseBackend, expectSessionEnded, failure, textOf, type Connected } from './bridge-support.js';
import { nodeEntry } from '../helpers/node-entry.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/stdio-backend.ts', import.meta.url));
/** Absolute, so the child needs no particular working directory to load TypeScript. */
/** A client-visible error that the bridge produces should arrive well within this. */
const PROMPT_MS = 5_000;

const fixtureBackend = (name: string) => ({
  name,
  transport: 'stdio' as const,
  command: process.execPath,
  args: nodeEntry(FIXTURE),
  env: { FIXTURE_GREETING: 'configured env reaches the child' },
  timeout: '15s',
});

let oauth: OAuthHandle | undefined;
let gateway: GatewayHandle | undefined;
let token = '';
const clients: Connected[] = [];
const extraGateways: GatewayHandle[] = [];

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Waits (bounded) until `pid` is gone. */
async function waitForExit(pid: number, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > until) assert.fail(`process ${pid} still runs after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function processInfo(session: Connected): Promise<{ pid: number; greeting: string | null; sawGatewaySecret: boolean }> {
  const result = await withDeadline(session.client.callTool({ name: 'process-info', arguments: {} }), 10_000, 'tools/call process-info');
  return JSON.parse(textOf(result)) as { pid: number; greeting: string | null; sawGatewaySecret: boolean };
}

before(async () => {
  // A secret in the gateway's own environment: children must not inherit it.
  process.env[GATEWAY_SECRET_VAR] = 'must-not-leak';
  oauth = await startOAuthServer();
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [
      fixtureBackend('local'),
      { name: 'missing', transport: 'stdio', command: '/nonexistent/switchboard-no-such-command', timeout: '10s' },
      { name: 'quitter', transport: 'stdio', command: process.execPath, args: ['-e', 'process.stderr.write("cannot run here\\n"); process.exit(3)'], timeout: '10s' },
      { name: 'mute', transport: 'stdio', command: process.execPath, args: ['-e', 'process.stdin.resume()'], timeout: '1s' },
    ],
  });
  token = await oauth.token({ sub: 'stdio-user', aud: gateway.audience });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await Promise.allSettled([gateway?.close(), ...extraGateways.map((g) => g.close())]);
  await oauth?.stop();
  delete process.env[GATEWAY_SECRET_VAR];
});

describe('a stdio backend through the gateway', () => {
  test('initialize, tools/list, tools/call, progress, sampling and resources/read', async () => {
    const session = await connectClient(gateway!.endpoint('local'), token, clients);
    assert.equal(session.client.getServerVersion()?.name, 'bridge-fixture');
    await exerciseBackend(session);
    await session.close();
  });

  test('each session gets its own child, with the configured env and not the gateway environment', async () => {
    const [a, b] = await Promise.all([connectClient(gateway!.endpoint('local'), token, clients), connectClient(gateway!.endpoint('local'), token, clients)]);
    const [infoA, infoB] = await Promise.all([processInfo(a!), processInfo(b!)]);
    assert.notEqual(infoA.pid, infoB.pid);
    assert.notEqual(infoA.pid, process.pid);
    assert.equal(infoA.greeting, 'configured env reaches the child');
    assert.equal(infoA.sawGatewaySecret, false, 'the gateway environment leaked into the child');
    await Promise.all([a!.transport.terminateSession(), b!.transport.terminateSession()]);
    await Promise.all([waitForExit(infoA.pid, 10_000), waitForExit(infoB.pid, 10_000)]);
  });

  test('DELETE ends the session and its child process', async () => {
    const session = await connectClient(gateway!.endpoint('local'), token, clients);
    const { pid } = await processInfo(session);
    assert.ok(isAlive(pid));
    await withDeadline(session.transport.terminateSession(), 10_000, 'DELETE');
    await waitForExit(pid, 10_000);
  });

  test('a child that dies ends the session: the next request gets 404', async () => {
    const session = await connectClient(gateway!.endpoint('local'), token, clients);
    const { pid } = await processInfo(session);
    process.kill(pid, 'SIGKILL');
    await waitForExit(pid, 5_000);
    await expectSessionEnded(() => session.client.callTool({ name: 'echo', arguments: { text: 'anyone there?' } }));
  });

  test('a call that is open when the child dies gets a JSON-RPC error, not a hang', async () => {
    const session = await connectClient(gateway!.endpoint('local'), token, clients);
    const { pid } = await processInfo(session);
    // The sampling request waits for the client; kill the child while the call is open.
    let release: () => void = () => {};
    const asked = new Promise<void>((resolve) => (release = resolve));
    session.client.setRequestHandler(CreateMessageRequestSchema, async () => {
      release();
      await new Promise((resolve) => setTimeout(resolve, 60_000).unref());
      return { model: 'never', role: 'assistant', content: { type: 'text', text: 'too late' } };
    });
    const call = failure(() => session.client.callTool({ name: 'sample', arguments: { prompt: 'wait' } }), 10_000, 'tools/call sample while the child dies');
    await withDeadline(asked, 10_000, 'the sampling request reaching the client');
    process.kill(pid, 'SIGKILL');
    const { error } = await call;
    assertMcpError(error, -32010, /process exited/);
  });
});

describe('a 2026-07-28 client (the v2 SDK, pinned) on a stdio backend', () => {
  test("tools listed and called; the child's sampling request answered by the client through the era bridge", async () => {
    const client = new V2Client({ name: 'v2-stdio', version: '1.0.0' }, { capabilities: { sampling: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
    client.setRequestHandler('sampling/createMessage', async () => ({ model: 'test-model', role: 'assistant', content: { type: 'text', text: 'from the v2 client' } }));
    try {
      await withDeadline(client.connect(new V2Transport(gateway!.endpoint('local'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } })), 15_000, 'v2 connect');
      const tools = await withDeadline(client.listTools(), 10_000, 'tools/list');
      assert.ok(tools.tools.some((t) => t.name === 'echo'));
      assert.equal(textOf(await withDeadline(client.callTool({ name: 'echo', arguments: { text: 'over 2026-07-28' } }), 10_000, 'echo')), 'over 2026-07-28');
      assert.equal(textOf(await withDeadline(client.callTool({ name: 'sample', arguments: { prompt: 'p' } }), 15_000, 'sample')), 'sampled: from the v2 client');
    } finally {
      await client.close().catch(() => {});
    }
  });
});

describe('stdio backends that cannot serve', () => {
  test('a command that does not exist: McpError -32010 naming the problem, promptly', async () => {
    const { error, elapsed } = await failure(() => connectClient(gateway!.endpoint('missing'), token, clients), PROMPT_MS, 'connect to a missing command');
    assertMcpError(error, -32010, /backend "missing" could not be started: its command was not found/);
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
  });

  test('a child that exits at once: McpError -32010, promptly', async () => {
    const { error, elapsed } = await failure(() => connectClient(gateway!.endpoint('quitter'), token, clients), PROMPT_MS, 'connect to a child that exits');
    assertMcpError(error, -32010, /backend "quitter" session ended: the backend process exited/);
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
  });

  test('a child that never answers initialize: an error within its timeout (1s)', async () => {
    const { error, elapsed } = await failure(() => connectClient(gateway!.endpoint('mute'), token, clients), PROMPT_MS, 'connect to a mute child');
    // Whichever notices first: the bridge (-32010, initialize not answered) or the gateway (-32011).
    assert.ok(error instanceof McpError && (error.code === -32010 || error.code === -32011), `got ${String(error)}`);
    assert.ok(elapsed < PROMPT_MS, `error after ${elapsed} ms`);
  });
});

describe('bridge sessions end with the gateway', () => {
  test('after bridge.idleTimeout without traffic the child is stopped, though the gateway session lives on', async () => {
    const idle = await startGateway({ issuer: oauth!.issuer, backends: [fixtureBackend('local')], overrides: { bridge: { idleTimeout: '1s' } } });
    extraGateways.push(idle);
    const idleToken = await oauth!.token({ sub: 'stdio-user', aud: idle.audience });
    const session = await connectClient(idle.endpoint('local'), idleToken, clients);
    const { pid } = await processInfo(session);
    // Stop the client's GET stream from counting as traffic: close the client first.
    await session.close();
    await waitForExit(pid, 10_000);
  });

  test('closing the gateway stops every child', async () => {
    const closing = await startGateway({ issuer: oauth!.issuer, backends: [fixtureBackend('local')] });
    extraGateways.push(closing);
    const closingToken = await oauth!.token({ sub: 'stdio-user', aud: closing.audience });
    const sessions = await Promise.all([connectClient(closing.endpoint('local'), closingToken, clients), connectClient(closing.endpoint('local'), closingToken, clients)]);
    const pids = await Promise.all(sessions.map(async (s) => (await processInfo(s)).pid));
    extraGateways.splice(extraGateways.indexOf(closing), 1);
    await withDeadline(closing.close(), 15_000, 'gateway close');
    await Promise.all(pids.map((pid) => waitForExit(pid, 10_000)));
  });
});
