/**
 * Config hot reload (issue 32 §1, docs/operations-reload.md) on two real gateway replicas
 * sharing a real Redis, each started from a config file mounted the way Kubernetes mounts a
 * ConfigMap (`switchboard.yaml` → `..data/switchboard.yaml`, `..data` → a timestamped
 * directory) and updated by the kubelet's atomic `..data` swap: no signal is sent, the
 * directory watch must see it. Backends are real SDK servers (test/fixtures/announcing-backend.ts).
 *
 * Then one more gateway process is reloaded by SIGHUP alone: its config file is a symlink
 * into another directory, whose file is rewritten in place, so the watched directory sees
 * nothing and only the signal can make the gateway read it.
 */
import assert from 'node:assert/strict';
import { mkdtemp, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.js';
import { spawnChild, waitUntil, type ChildHandle } from '../helpers/child.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { freePort } from '../helpers/free-port.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startTestRedis, type TestRedis } from '../helpers/redis-topology.js';
import { eventually, openStream as openAt, RELOAD_WAIT_MS as WAIT_MS, reloadCount as reloads, startReloadingReplicas, untilEnd, type ReloadingReplicas } from '../helpers/reload-replicas.js';
import type { ReplicaSet } from '../helpers/replicas.js';
import { sessionToolNames } from '../helpers/pages.js';
import { sessionClient } from '../helpers/session-client.js';
import { messageOf, type SseReader } from '../helpers/sse-client.js';
import { nodeEntry } from '../helpers/node-entry.js';

let redis: TestRedis;
let oauth: OAuthHandle;
let alpha: FixtureChild;
let beta: FixtureChild;
let mounted: ReloadingReplicas;
let set: ReplicaSet;
let token: string;

before(async () => {
  [redis, oauth, alpha, beta] = await Promise.all([startTestRedis(), startOAuthServer(), startFixtureChild('announcing-backend.ts'), startFixtureChild('announcing-backend.ts')]);
  mounted = await startReloadingReplicas({ count: 2, redis: redis.config, issuer: oauth.issuer, backends: [{ name: 'alpha', url: alpha.url }] });
  set = mounted.set;
  token = await oauth.token({ sub: 'reloading-user', aud: set.audience });
});

after(async () => {
  await mounted?.stop();
  await Promise.allSettled([alpha?.child.stop(), beta?.child.stop(), oauth?.stop(), redis?.stop()]);
});

const swapAll = (change: Record<string, unknown>) => mounted.swapAll(change);
const allCount = (outcome: string, count: number) => mounted.allCount(outcome, count);
const replicaLogs = () => mounted.logs();
const client = (replica: number, backend: string) => sessionClient(() => set.endpoint(replica, backend), 'reload-test');
const openStream = (replica: number, backend: string, sessionId: string) => openAt(set.endpoint(replica, backend), token, sessionId);

/** Calls `announce` in the session and waits for its text on the open stream. */
async function announceArrives(replica: number, backend: string, sessionId: string, stream: SseReader, text: string): Promise<void> {
  const res = await client(replica, backend).post(token, { jsonrpc: '2.0', id: text, method: 'tools/call', params: { name: 'announce', arguments: { text } } }, sessionId);
  assert.equal(res.status, 200);
  assert.match(await res.text(), new RegExp(`announced ${text}`));
  for (;;) {
    const event = await stream.next(WAIT_MS);
    assert.ok(event, `the stream ended before "${text}" arrived`);
    const message = event.data ? messageOf(event) : undefined;
    if (message?.method === 'notifications/message' && (message.params as { data?: unknown }).data === text) return;
  }
}

const metadataStatus = async (replica: number, backend: string) => (await fetch(`${set.replicas[replica]!.url}/.well-known/oauth-protected-resource/mcp/${backend}`)).status;

describe('config reload on two replicas from a ConfigMap-style mount', () => {
  let alphaSession: string;
  let alphaStream: SseReader;
  let betaSession: string;

  test('(a) a backend added by the ..data swap is served without a signal; the other backend\'s session and open stream are untouched', async () => {
    alphaSession = await client(0, 'alpha').initialize(token);
    alphaStream = await openStream(0, 'alpha', alphaSession);
    await announceArrives(0, 'alpha', alphaSession, alphaStream, 'before-reload');
    assert.equal(await metadataStatus(1, 'beta'), 404);

    await swapAll({ backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta', url: beta.url }] });
    await allCount('applied', 1);

    for (const replica of [0, 1]) assert.equal(await metadataStatus(replica, 'beta'), 200, 'RFC 9728 metadata of the added backend');
    // Its sessions work across both replicas: initialized on one, called on the other.
    betaSession = await client(1, 'beta').initialize(token);
    const call = await client(0, 'beta').post(token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'announce', arguments: { text: 'hello-beta' } } }, betaSession);
    assert.equal(call.status, 200);
    assert.match(await call.text(), /announced hello-beta/);
    // As a member of the aggregated /mcp too.
    const aggregated = sessionClient(() => new URL(`${set.replicas[1]!.url}/mcp`), 'reload-test');
    const names = await sessionToolNames(aggregated, token, await aggregated.initialize(token));
    assert.deepEqual(names, ['alpha__announce', 'beta__announce']);

    // alpha: the same session id answers, and the stream opened before the reload still receives.
    assert.equal(await client(1, 'alpha').pingStatus(token, alphaSession), 200);
    await announceArrives(0, 'alpha', alphaSession, alphaStream, 'after-add');
  });

  test('(b) a removed backend\'s sessions end: the open stream closes with retry as its last event, the next request gets 404', async () => {
    const betaStream = await openStream(1, 'beta', betaSession);
    await swapAll({ backends: [{ name: 'alpha', url: alpha.url }] });
    await allCount('applied', 2);

    const events = await untilEnd(betaStream);
    assert.ok(events.at(-1)?.retry !== undefined, `the last event tells the client when to come back: ${JSON.stringify(events)}`);
    for (const replica of [0, 1]) {
      assert.equal(await client(replica, 'beta').pingStatus(token, betaSession), 404);
      assert.equal(await metadataStatus(replica, 'beta'), 404);
    }
    assert.equal(await client(1, 'alpha').pingStatus(token, alphaSession), 200);
    await announceArrives(0, 'alpha', alphaSession, alphaStream, 'after-remove');
  });

  test('(c) an invalid file is refused with the message it would fail the start with; the old config keeps serving', async () => {
    await swapAll({ backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta' }] });
    // The message `switchboard --config` prints when it refuses to start on this file.
    const expected = (() => {
      try {
        loadConfigFile(mounted.file(0), {});
      } catch (err) {
        return (err as Error).message;
      }
      assert.fail('the file is invalid');
    })();
    assert.equal(expected, 'config: backends[1].url: is required for transport streamable-http');
    await allCount('invalid', 1);
    await eventually('every replica to log the refusal naming the key', async () => set.replicas.every((r) => r.child.logs().includes(expected)), replicaLogs);

    assert.equal(await metadataStatus(0, 'beta'), 404);
    assert.equal(await client(1, 'alpha').pingStatus(token, alphaSession), 200);
    await announceArrives(0, 'alpha', alphaSession, alphaStream, 'after-invalid');
  });

  test('a restart-only key changed is not applied, not even the rest of the file', async () => {
    await swapAll({ publicUrl: 'http://gateway.example', backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta', url: beta.url }] });
    await allCount('needs_restart', 1);
    await eventually('every replica to log "needs restart"', async () => set.replicas.every((r) => /needs restart: publicUrl/.test(r.child.logs())), replicaLogs);
    assert.equal(await metadataStatus(1, 'beta'), 404, 'the backend added in the same file is not served');
    await announceArrives(0, 'alpha', alphaSession, alphaStream, 'after-needs-restart');
  });
});

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('SIGHUP', () => {
  let gateway: ChildHandle | undefined;
  after(async () => gateway?.stop());

  test('(d) SIGHUP reloads a file the directory watch cannot see change', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const [watched, elsewhere] = await Promise.all([mkdtemp(join(tmpdir(), 'sb-hup-link-')), mkdtemp(join(tmpdir(), 'sb-hup-file-'))]);
    const base = { publicUrl: url, listen: { host: '127.0.0.1', port }, auth: { issuer: oauth.issuer, audience: `${url}/mcp` }, log: { level: 'warn' } };
    const real = join(elsewhere, 'switchboard.yaml');
    await writeFile(real, stringify({ ...base, backends: [{ name: 'alpha', url: alpha.url }] }));
    await symlink(real, join(watched, 'switchboard.yaml'));
    gateway = await spawnChild({
      name: 'switchboard (SIGHUP)',
      command: process.execPath,
      args: [...nodeEntry(join(ROOT, 'src/cli.ts')), '--config', join(watched, 'switchboard.yaml')],
      cwd: ROOT,
      env: { NODE_OPTIONS: '' },
    });
    // Polled tightly and signalled at once: a SIGHUP right after readiness must reload, not
    // end the process (Node's default for SIGHUP), as it did while the watch was still loading.
    await waitUntil(async () => ((await fetch(`${url}/readyz`).then((r) => r.status, () => 0)) === 200 ? true : undefined), {
      what: 'the gateway to be ready',
      timeoutMs: 30_000,
      intervalMs: 5,
      details: () => gateway!.logs(),
    });
    gateway.process.kill('SIGHUP');
    await eventually('the SIGHUP at readiness to be read (an unchanged file)', async () => (await reloads(url, 'unchanged')) === 1, () => gateway!.logs());

    await writeFile(real, stringify({ ...base, backends: [{ name: 'alpha', url: alpha.url }, { name: 'beta', url: beta.url }] }));
    assert.equal((await fetch(`${url}/.well-known/oauth-protected-resource/mcp/beta`)).status, 404);
    assert.equal(await reloads(url, 'applied'), 0);
    gateway.process.kill('SIGHUP');
    await eventually('the reload by SIGHUP', async () => (await reloads(url, 'applied')) === 1, () => gateway!.logs());
    assert.equal((await fetch(`${url}/.well-known/oauth-protected-resource/mcp/beta`)).status, 200);
    assert.equal(gateway.exit, undefined, 'SIGHUP does not end the process');
  });
});
