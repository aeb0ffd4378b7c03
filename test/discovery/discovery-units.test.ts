/**
 * Tool search (issue 31 §3) without a network: the `discovery` config keys and their errors,
 * the ranking of the 300-tool catalog (the same 20 queries as the gateway test, in process),
 * how names are split, that an index is shared by equal lists and rebuilt for a changed one,
 * and the checks of the gateway tools' arguments.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';
import { callArguments, searchArguments } from '../../src/discovery/gateway-tools.js';
import { indexFor, listDigest, tokenize, ToolIndex } from '../../src/discovery/tool-index.js';
import { catalogOf } from '../fixtures/tool-catalog.js';
import { QUERIES } from './search-queries.js';

function config(extra: Record<string, unknown>): Record<string, unknown> {
  return {
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://login.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [{ name: 'github', url: 'https://github.example.com/mcp' }],
    ...extra,
  };
}

function fails(extra: Record<string, unknown>, key: string, problem: RegExp): void {
  assert.throws(
    () => parseConfig(config(extra)),
    (err: unknown) => err instanceof ConfigError && err.key === key && problem.test(err.message),
  );
}

/** The catalog as `/mcp` lists it: names qualified with their backend. */
const catalog = (['github', 'work', 'cloud'] as const).flatMap((d) => catalogOf(d).map((t) => ({ name: `${d}__${t.name}`, title: t.title, description: t.description, inputSchema: { type: 'object' } })));

describe('the discovery config keys', () => {
  test('absent by default (off); a threshold at the top level and per virtual server', () => {
    assert.equal(parseConfig(config({})).discovery, undefined);
    const c = parseConfig(config({ discovery: { threshold: 50 }, servers: [{ name: 'ops', discovery: { threshold: 0 }, tools: [{ from: 'github.merge' }] }] }));
    assert.deepEqual(c.discovery, { threshold: 50 });
    assert.deepEqual(c.servers[0]!.discovery, { threshold: 0 });
  });

  test('errors name the key', () => {
    fails({ discovery: {} }, 'discovery.threshold', /is required: the most tools listed as they are/);
    fails({ discovery: { threshold: 2.5 } }, 'discovery.threshold', /must be a whole number/);
    fails({ discovery: { threshold: -1 } }, 'discovery.threshold', /must be 0 or more/);
    fails({ discovery: { threshold: 5, limit: 3 } }, 'discovery', /limit/);
    fails({ servers: [{ name: 'ops', discovery: { threshold: 'many' }, tools: [{ from: 'github.merge' }] }] }, 'servers[0].discovery.threshold', /must be a whole number/);
  });

  test("with discovery, a virtual server may not offer a tool under the gateway tools' names", () => {
    fails({ servers: [{ name: 'ops', discovery: { threshold: 5 }, tools: [{ from: 'github.find', as: 'search_tools' }] }] }, 'servers[0].tools[0].as', /discovery gives the gateway's own tool/);
    fails({ servers: [{ name: 'ops', discovery: { threshold: 5 }, tools: [{ from: 'github.call_tool' }] }] }, 'servers[0].tools[0].from', /rename it with as/);
    assert.doesNotThrow(() => parseConfig(config({ servers: [{ name: 'ops', tools: [{ from: 'github.call_tool' }] }] })), 'without discovery the name is free');
  });
});

describe('ranking', () => {
  test('the 300-tool catalog: each of the 20 natural queries finds its tool in the top 3', () => {
    const index = new ToolIndex(catalog);
    assert.equal(index.size, 300);
    const misses = QUERIES.filter(([query, expected]) => !index.search(query, 3).some((t) => t.name === expected));
    assert.deepEqual(misses, []);
  });

  test('names are split on _, -, . and camelCase, acronyms kept whole', () => {
    assert.deepEqual(tokenize('github__create_pull_request'), ['github', 'create', 'pull', 'request']);
    assert.deepEqual(tokenize('listS3Buckets'), ['list', 'S3', 'Buckets']);
    assert.deepEqual(tokenize('jira-search-jql'), ['jira', 'search', 'jql']);
    assert.deepEqual(tokenize('getHTTPRoute.v2'), ['get', 'HTTP', 'Route', 'v2']);
  });

  test('prefixes and small typos match; filler words alone match nothing; a result carries what a call needs', () => {
    const index = new ToolIndex(catalog);
    assert.equal(index.search('kubernet', 1)[0]?.name.includes('GkeCluster'), true, 'a prefix');
    assert.equal(index.search('rebot instance', 1)[0]?.name, 'cloud__rebootEc2Instance', 'a typo');
    assert.deepEqual(index.search('the a for my', 5), []);
    assert.deepEqual(Object.keys(index.search('jql', 1)[0]!), ['name', 'title', 'description', 'inputSchema']);
  });

  test('equal lists share one index; a changed list gets a new one', () => {
    const copy = catalog.map((t) => ({ ...t }));
    const first = indexFor(listDigest(catalog), catalog);
    assert.equal(indexFor(listDigest(copy), copy), first, 'another user, same tools: the same index');
    const changed = [...catalog.slice(1), { name: 'cloud__newTool', description: 'Brand new capability', inputSchema: {} }];
    const second = indexFor(listDigest(changed), changed);
    assert.notEqual(second, first);
    assert.equal(second.search('brand new capability', 1)[0]?.name, 'cloud__newTool');
  });
});

describe('the gateway tools', () => {
  test('search_tools needs a query; limit is 1 to 50, 8 when absent', () => {
    assert.deepEqual(searchArguments({ query: 'x' }), { query: 'x', limit: 8 });
    assert.deepEqual(searchArguments({ query: 'x', limit: 50 }), { query: 'x', limit: 50 });
    for (const bad of [undefined, {}, { query: '  ' }, { query: 3 }, { query: 'x', limit: 51 }, { query: 'x', limit: 1.5 }]) assert.ok('refused' in searchArguments(bad), JSON.stringify(bad));
  });

  test('call_tool needs a name other than the gateway tools; arguments an object, {} when absent', () => {
    assert.deepEqual(callArguments({ name: 'github__merge_pull_request' }), { name: 'github__merge_pull_request', arguments: {} });
    assert.deepEqual(callArguments({ name: 'a', arguments: { n: 1 } }), { name: 'a', arguments: { n: 1 } });
    for (const bad of [{}, { name: '' }, { name: 'call_tool' }, { name: 'search_tools' }, { name: 'a', arguments: [1] }, { name: 'a', arguments: 'x' }]) assert.ok('refused' in callArguments(bad), JSON.stringify(bad));
  });
});
