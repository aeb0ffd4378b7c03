/**
 * The newcomer's first command (README "Two commands", SPEC §3): with no config file the CLI starts the
 * embedded development default and prints an endpoint and a bearer token that the
 * official SDK client can use at once. Also: SIGTERM ends it with exit code 0, and a bad
 * config file stops it with an error that names the key.
 */
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { after, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawnChild, type ChildHandle } from '../helpers/child.js';
import { freePort } from '../helpers/free-port.js';
import { nodeEntry } from '../helpers/node-entry.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** tsx resolved from the project, so the CLI can run from an empty working directory. */
const children: ChildHandle[] = [];
after(async () => {
  await Promise.allSettled(children.map((c) => c.stop()));
});

test('no config: prints an endpoint and a token that the SDK client can use at once', async () => {
  const port = await freePort();
  // An empty working directory: no ./switchboard.yaml to pick up.
  const cwd = await mkdtemp(join(tmpdir(), 'sb-dev-'));
  const cli = await spawnChild({
    name: 'switchboard (development default)',
    command: process.execPath,
    args: [...nodeEntry(join(ROOT, 'src/cli.ts')), '--port', String(port)],
    cwd,
    env: { SWITCHBOARD_CONFIG: '', NODE_OPTIONS: '' },
    ready: (line) => line.includes('Bearer token:'),
    readyTimeoutMs: 40_000,
  });
  children.push(cli);
  const output = cli.logs();
  const endpoint = /MCP endpoint:\s+(\S+)/.exec(output)?.[1];
  const token = /Bearer token:\s+(\S+)/.exec(output)?.[1];
  assert.equal(endpoint, `http://127.0.0.1:${port}/mcp/everything`);
  assert.match(token ?? '', /^[\w-]+\.[\w-]+\.[\w-]+$/, 'a JWT');

  const client = new Client({ name: 'newcomer', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(endpoint!), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  try {
    assert.equal(client.getServerVersion()?.name, 'mcp-servers/everything');
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'echo'), 'the demo backend offers echo');
    const result = await client.callTool({ name: 'echo', arguments: { message: 'hello switchboard' } });
    assert.match(JSON.stringify(result.content), /hello switchboard/);
  } finally {
    await transport.terminateSession().catch(() => {});
    await client.close();
  }

  // Without the token the same endpoint refuses.
  const refused = await fetch(endpoint!, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
  assert.equal(refused.status, 401);

  cli.process.kill('SIGTERM');
  // The child is unref'd by the helper; a timer keeps this process waiting, with a deadline.
  let timer: NodeJS.Timeout | undefined;
  const exit = await Promise.race([
    cli.exited,
    new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no exit within 30 s of SIGTERM')), 30_000))),
  ]).finally(() => clearTimeout(timer));
  assert.equal(exit.code, 0, `exit code after SIGTERM (output: ${cli.logs().slice(-500)})`);
});

test('a bad config file stops the CLI with an error that names the key', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'sb-config-'));
  const file = join(dir, 'switchboard.yaml');
  await writeFile(file, 'publicUrl: https://mcp.example.com\nauth: { issuer: https://idp.example.com, audience: x }\nbackends:\n  - name: Bad_Name\n    url: https://backend.example.com/mcp\n');
  const child = spawn(process.execPath, [...nodeEntry(join(ROOT, 'src/cli.ts')), '--config', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('the CLI did not exit within 20 s'));
    }, 20_000);
    child.once('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  assert.equal(code, 1);
  assert.match(stderr, /config: backends\[0\]\.name: must match \[a-z0-9-\]\+/);
});
