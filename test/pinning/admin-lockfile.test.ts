/**
 * `POST /admin/pins/approve` refuses a backend whose pins are its lockfile (issue 41 §7), as
 * `switchboard pins approve` does: the file is the pins, so an approval could only write pins
 * into the store that nothing serves, and answer "approved" for a change that stays blocked.
 * A real gateway (memory store, admin route on its metrics listener) in front of a real SDK
 * backend (test/fixtures/hostile-backend.ts) whose tools the lockfile does not list.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { startHostileBackend, type HostileBackend } from '../fixtures/hostile-backend.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

const ADMIN_TOKEN = randomBytes(24).toString('base64url');

/** The memory store, with every write it takes recorded. */
class WatchedStore extends MemoryStore {
  readonly writes: string[] = [];
  override async putField(key: string, field: string, value: string): Promise<void> {
    this.writes.push(`putField ${key} ${field}`);
    return super.putField(key, field, value);
  }
  override async putFieldIfAbsent(key: string, field: string, value: string): Promise<boolean> {
    this.writes.push(`putFieldIfAbsent ${key} ${field}`);
    return super.putFieldIfAbsent(key, field, value);
  }
  override async deleteField(key: string, field: string): Promise<boolean> {
    this.writes.push(`deleteField ${key} ${field}`);
    return super.deleteField(key, field);
  }
  override async putValue(key: string, value: string, ttlMs?: number): Promise<void> {
    this.writes.push(`putValue ${key}`);
    return super.putValue(key, value, ttlMs);
  }
}

let idp: OAuthHandle;
let backend: HostileBackend;
let gateway: GatewayHandle;
let metricsUrl: string;
const store = new WatchedStore();

before(async () => {
  [idp, backend] = await Promise.all([startOAuthServer(), startHostileBackend()]);
  const dir = await mkdtemp(join(tmpdir(), 'sb-admin-lockfile-'));
  const lockfile = join(dir, 'pins.json');
  await writeFile(lockfile, JSON.stringify({ schema: 'switchboard.pins/v1', backends: { locked: {} } }));
  const port = await freePort();
  metricsUrl = `http://127.0.0.1:${port}`;
  gateway = await startGateway({
    issuer: idp.issuer,
    store,
    backends: [
      { name: 'locked', url: backend.url, pinning: { mode: 'block', lockfile } },
      { name: 'open', url: backend.url, pinning: { mode: 'block' } },
    ],
    overrides: { metrics: { listen: { host: '127.0.0.1', port } }, admin: { token: ADMIN_TOKEN } } as never,
  });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([backend?.close(), idp?.stop()]);
});

const approve = (body: unknown) => fetch(`${metricsUrl}/admin/pins/approve`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` }, body: JSON.stringify(body) });

test('the admin route refuses to approve a lockfile backend (409), and the store is left as it was', async () => {
  const client = new Client({ name: 'carol', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('locked'), { requestInit: { headers: { Authorization: `Bearer ${await idp.token({ sub: 'carol', aud: gateway.audience })}` } } }));
  try {
    assert.deepEqual((await client.listTools()).tools, [], 'no tool is in the lockfile: all wait');
  } finally {
    await client.close();
  }
  const writes = store.writes.length;
  for (const body of [{ backend: 'locked' }, { backend: 'locked', tool: 'search' }]) {
    const res = await approve(body);
    const answer = (await res.json()) as { error?: string; error_description?: string };
    assert.equal(res.status, 409, JSON.stringify(answer));
    assert.equal(answer.error, 'conflict');
    assert.match(String(answer.error_description), /pins of backend "locked" are its lockfile .*pins\.json.*export the new definitions and replace the file/);
  }
  assert.deepEqual(store.writes.slice(writes), [], 'nothing was written to the store');
  // A backend without a lockfile is approved as before; an unknown one is 404.
  assert.equal((await approve({ backend: 'open' })).status, 200);
  assert.equal((await approve({ backend: 'nope' })).status, 404);
});
