/**
 * A reload that drops or loosens policy, access or pinning logs a warning naming what loosened
 * (issue 41 §6, src/reload/loosening.ts), and counts it in
 * `switchboard_config_reloads_loosened_total{kind}`: first what is judged a loosening (configs
 * as the loader gives them), then the warning and the count of an in-process gateway applying
 * such files as a reload does (a real SDK backend, a real OAuth server).
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.js';
import type { Config, ConfigInput } from '../../src/config/schema.js';
import { looseningsOf } from '../../src/reload/loosening.js';
import { startFixtureChild, type FixtureChild } from '../helpers/fixture-child.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { captureLogLines } from '../helpers/log-lines.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

type Backend = ConfigInput['backends'][number];
const NO_WIPE = { name: 'no-wipe', effect: 'deny' as const, when: 'mcp.tool.name == "wipe"' };
const OPS = { name: 'ops', effect: 'allow' as const, when: '"ops" in jwt.groups' };

const config = (change: Partial<ConfigInput> = {}, backend: Partial<Backend> = {}): Config =>
  parseConfig({ publicUrl: 'https://gw.example', auth: { issuer: 'https://idp.example', audience: 'gw', tenantClaim: 'tid' }, backends: [{ name: 'files', url: 'https://files.example/mcp', ...backend }], ...change });
const loosened = (was: Config, is: Config) => looseningsOf(was, is).map((l) => `${l.kind}: ${l.what}`);

describe('what a reload loosens', () => {
  test('policy: a deny rule removed, turned to allow or changed; the whole block gone; the default opened', () => {
    const strict = config({ policy: { rules: [NO_WIPE], default: 'deny' } });
    assert.deepEqual(loosened(strict, config({ policy: { rules: [], default: 'deny' } })), ['policy: policy.rules["no-wipe"] (deny) removed']);
    assert.deepEqual(loosened(strict, config({ policy: { rules: [{ ...NO_WIPE, effect: 'allow' }], default: 'deny' } })), ['policy: policy.rules["no-wipe"] effect deny → allow']);
    assert.deepEqual(loosened(strict, config({ policy: { rules: [{ ...NO_WIPE, when: 'false' }], default: 'deny' } })), ['policy: policy.rules["no-wipe"].when changed (deny)']);
    assert.deepEqual(loosened(strict, config()), ['policy: policy.rules["no-wipe"] (deny) removed', 'policy: policy.default deny → allow']);
  });

  test('policy: an allow rule that can let through what a later deny rule or the default refused', () => {
    const ordered = config({ policy: { rules: [NO_WIPE, OPS] } });
    assert.deepEqual(loosened(ordered, config({ policy: { rules: [OPS, NO_WIPE] } })), ['policy: policy.rules["ops"] (allow) moved before "no-wipe"']);
    assert.deepEqual(loosened(config({ policy: { rules: [NO_WIPE] } }), config({ policy: { rules: [OPS, NO_WIPE] } })), ['policy: policy.rules["ops"] (allow) added']);
    assert.deepEqual(loosened(config({ policy: { rules: [NO_WIPE] } }), ordered), [], 'an allow rule after every deny rule, default allow: nothing it could open');
    assert.deepEqual(loosened(config({ policy: { default: 'deny' } }), config({ policy: { rules: [OPS], default: 'deny' } })), ['policy: policy.rules["ops"] (allow) added']);
  });

  test("access: a backend's scopes, tenants, claims and tool lists widened", () => {
    const narrow = config({}, { access: { scopes: ['files:use', 'files:admin'], tenants: ['acme'], claims: { groups: ['eng'] }, tools: { allow: ['read_*'], deny: ['read_secrets'] } } });
    const wide = config({}, { access: { scopes: ['files:use'], tenants: [], claims: { groups: ['eng', 'sales'] }, tools: { allow: ['read_*', 'write_*'], deny: [] } } });
    assert.deepEqual(loosened(narrow, wide), [
      'access: backends.files.access.scopes no longer requires "files:admin"',
      'access: backends.files.access.tenants removed (any tenant)',
      'access: backends.files.access.claims["groups"] adds "sales"',
      'access: backends.files.access.tools.deny drops "read_secrets"',
      'access: backends.files.access.tools.allow adds "write_*"',
    ]);
    assert.deepEqual(loosened(narrow, config({}, { access: { ...wide.backends[0]!.access, tenants: ['acme', 'globex'], claims: {}, tools: { allow: [], deny: ['read_secrets'] } } })).slice(1), [
      'access: backends.files.access.tenants adds "globex"',
      'access: backends.files.access.claims["groups"] removed',
      'access: backends.files.access.tools.allow removed (every tool)',
    ]);
    assert.deepEqual(loosened(wide, narrow), [], 'narrowing is not loosening');
  });

  test('pinning: a weaker mode, the lockfile removed or replaced', () => {
    const pinned = config({}, { pinning: { mode: 'block', lockfile: 'pins.json' } });
    assert.deepEqual(loosened(pinned, config({}, { pinning: { mode: 'log' } })), ['pinning: backends.files.pinning.mode block → log', 'pinning: backends.files.pinning.lockfile removed']);
    assert.deepEqual(loosened(pinned, config({}, { pinning: { mode: 'hold', lockfile: 'other.json' } })), ['pinning: backends.files.pinning.mode block → hold', 'pinning: backends.files.pinning.lockfile pins.json → other.json']);
    assert.deepEqual(loosened(config({}, { pinning: { mode: 'log' } }), pinned), []);
    assert.deepEqual(loosened(config({}, { pinning: { mode: 'block', scope: 'user' } }), config({}, { pinning: { mode: 'block', scope: 'backend' } })), ['pinning: backends.files.pinning.scope user → backend']);
    assert.deepEqual(loosened(config({}, { pinning: { mode: 'block', scope: 'backend' } }), config({}, { pinning: { mode: 'block', scope: 'user' } })), []);
  });
});

describe('a loosening reload on a running gateway', () => {
  let oauth: OAuthHandle;
  let alpha: FixtureChild;
  let gateway: GatewayHandle;
  const logs = captureLogLines();
  const strictAlpha = (): Backend => ({ name: 'alpha', url: alpha.url, access: { tools: { deny: ['wipe'] } }, pinning: { mode: 'block' } });
  const first = (): Partial<ConfigInput> => ({ log: { level: 'warn' }, policy: { rules: [NO_WIPE] } });
  const running = (change: Partial<ConfigInput>): Config => {
    const port = Number(new URL(gateway.url).port);
    return parseConfig({ publicUrl: gateway.url, listen: { host: '127.0.0.1', port }, auth: { issuer: oauth.issuer, audience: gateway.audience, algorithms: ['RS256', 'ES256'] }, backends: [strictAlpha()], ...first(), ...change });
  };
  const warnings = () => logs.lines.map((l) => JSON.parse(l) as { level: number; msg: string; loosened?: string[] }).filter((l) => l.level === 40 && l.loosened);
  const loosenedCount = async (kind: string) => Number(new RegExp(`^switchboard_config_reloads_loosened_total\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(await (await fetch(`${gateway.url}/metrics`)).text())?.[1] ?? 0);

  before(async () => {
    [oauth, alpha] = await Promise.all([startOAuthServer(), startFixtureChild('announcing-backend.ts')]);
    gateway = await startGateway({ issuer: oauth.issuer, backends: [strictAlpha()], overrides: first(), logStream: logs.stream });
  });
  after(async () => {
    await gateway?.close();
    await Promise.allSettled([alpha?.child.stop(), oauth?.stop()]);
  });
  beforeEach(() => {
    gateway.app.applyConfig(running({}));
    logs.lines.length = 0;
  });

  test('a deny rule removed: one warning naming it, counted as policy', async () => {
    assert.equal(gateway.app.applyConfig(running({ policy: { rules: [] } })), 'applied');
    const [warning, ...more] = warnings();
    assert.deepEqual(more, []);
    assert.deepEqual(warning!.loosened, ['policy.rules["no-wipe"] (deny) removed']);
    assert.match(warning!.msg, /config reload loosened policy, access or pinning: policy\.rules\["no-wipe"\] \(deny\) removed/);
    assert.equal(await loosenedCount('policy'), 1);
  });

  test('pinning weakened and access widened in one file: each named in one warning', async () => {
    const before = [await loosenedCount('access'), await loosenedCount('pinning')];
    assert.equal(gateway.app.applyConfig(running({ backends: [{ ...strictAlpha(), access: {}, pinning: { mode: 'log' } }] })), 'applied');
    assert.deepEqual(warnings().map((w) => w.loosened), [['backends.alpha.access.tools.deny drops "wipe"', 'backends.alpha.pinning.mode block → log']]);
    assert.deepEqual([await loosenedCount('access'), await loosenedCount('pinning')], [before[0]! + 1, before[1]! + 1]);
  });

  test('a reload that tightens or changes something else warns of nothing', () => {
    assert.equal(gateway.app.applyConfig(running({ policy: { rules: [NO_WIPE, { ...NO_WIPE, name: 'no-drop', when: 'mcp.tool.name == "drop"' }] }, log: { level: 'info' } })), 'applied');
    assert.deepEqual(warnings(), []);
  });
});
