/**
 * The config watch reads the file again only for changes that can concern it
 * (src/reload/config-watch.ts `concernsConfig`): a file written over and over in the same
 * directory — a log, an audit trail, anything in `/tmp` — no longer makes the gateway read,
 * parse and compare its config after each write, while an edit of the file itself is applied
 * as before. An in-process gateway watching its file as `switchboard --config` does, a real
 * OAuth server; the reloads are read from the gateway's own `/metrics`.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { concernsConfig } from '../../src/reload/config-watch.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { eventually } from '../helpers/reload-replicas.js';
import { startWatchedGateway, type WatchedGateway } from '../helpers/watched-gateway.js';

const OUTCOMES = ['applied', 'unchanged', 'invalid', 'needs_restart', 'failed'];

/** No call reaches a backend here; the config needs one. Nothing listens on port 9 (discard) of this host. */
const UNUSED_BACKEND = 'http://127.0.0.1:9/mcp';

let oauth: OAuthHandle;
let gateway: WatchedGateway;

before(async () => {
  oauth = await startOAuthServer();
  gateway = await startWatchedGateway(oauth.issuer, (base) => ({ ...base, reload: { settle: '100ms' }, backends: [{ name: 'alpha', url: UNUSED_BACKEND }] }));
});

after(async () => {
  await gateway?.close();
  await oauth?.stop();
});

async function reloadsOfAnyOutcome(): Promise<number> {
  let total = 0;
  for (const outcome of OUTCOMES) total += await gateway.reloads(outcome);
  return total;
}

describe('the config watch and the other files of its directory', () => {
  test('writes to another file of the directory read nothing; an edit of the config file is applied', async () => {
    const other = join(dirname(gateway.file), 'audit.jsonl');
    // 20 writes over about a second, then longer than the debounce (250 ms) and the settle window (100 ms).
    for (let i = 0; i < 20; i++) {
      await writeFile(other, `{"n":${i}}\n`, { flag: 'a' });
      await sleep(50);
    }
    await sleep(800);
    assert.equal(await reloadsOfAnyOutcome(), 0, 'a write to another file read the config again');
    assert.ok(!gateway.lines.some((line) => line.includes('config reload')), 'a reload was logged');

    await writeFile(gateway.file, stringify({ ...gateway.input, log: { level: 'warn' } }));
    await eventually('the edited config applied', async () => (await gateway.reloads('applied')) === 1);
  });

  test('which entries concern the file', () => {
    assert.equal(concernsConfig('switchboard.yaml', 'switchboard.yaml'), true);
    assert.equal(concernsConfig(Buffer.from('switchboard.yaml'), 'switchboard.yaml'), true);
    // A ConfigMap's swap: the link renamed over `..data`, its timestamped directory.
    assert.equal(concernsConfig('..data', 'switchboard.yaml'), true);
    assert.equal(concernsConfig('..2026_12_01_01_00_00.123456789', 'switchboard.yaml'), true);
    // The platform did not name the entry.
    assert.equal(concernsConfig(null, 'switchboard.yaml'), true);
    // Other files: a log, an editor's swap file, a file whose name only starts like the config's.
    assert.equal(concernsConfig('audit.jsonl', 'switchboard.yaml'), false);
    assert.equal(concernsConfig('.switchboard.yaml.swp', 'switchboard.yaml'), false);
    assert.equal(concernsConfig('switchboard.yaml.bak', 'switchboard.yaml'), false);
  });
});
