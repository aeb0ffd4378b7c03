/**
 * The one config object whose contents a reload replaces (src/config/live-config.ts): holders
 * of the object read the new values, keys the new config lacks go, and what a module derived
 * from the config is derived again after a replacement, once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { configGeneration, derived, replaceConfig } from '../../src/config/live-config.js';
import { parseConfig } from '../../src/config/load.js';

const config = (backends: string[], extra: Record<string, unknown> = {}) =>
  parseConfig({ publicUrl: 'https://mcp.example.com', auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' }, backends: backends.map((name) => ({ name, url: `http://127.0.0.1:9/${name}` })), ...extra });

describe('replaceConfig', () => {
  test('the same object holds the new contents; keys the new config lacks are removed', () => {
    const live = config(['a'], { redis: { url: 'redis://127.0.0.1:6379' } });
    const held = live;
    replaceConfig(live, config(['a', 'b']));
    assert.equal(held, live);
    assert.deepEqual(held.backends.map((b) => b.name), ['a', 'b']);
    assert.equal('redis' in held, false);
    assert.equal(configGeneration(live), 1);
  });
});

describe('derived', () => {
  test('works the value out once, and again only after the config was replaced', () => {
    const live = config(['a']);
    let runs = 0;
    const names = derived(live, (c) => (runs++, c.backends.map((b) => b.name)));
    assert.deepEqual(names(), ['a']);
    assert.deepEqual(names(), ['a']);
    assert.equal(runs, 1);
    replaceConfig(live, config(['a', 'c']));
    assert.deepEqual(names(), ['a', 'c']);
    assert.deepEqual(names(), ['a', 'c']);
    assert.equal(runs, 2);
  });
});
