/**
 * Virtual servers (issue 31 §1) without a network: the `servers` config block's errors, each
 * naming its key (a name clash with a backend, a `from` naming no backend, an argument both
 * fixed and hidden, a name offered twice), and how a backend's tool is offered and called
 * (aggregate/virtual-tools.ts, virtual-selection.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';
import { Selection } from '../../src/aggregate/virtual-selection.js';
import { callArguments, presentTool } from '../../src/aggregate/virtual-tools.js';
import { allAudiences, namedEndpoints } from '../../src/auth/resources.js';
import { resourceScopes } from '../../src/broker/resource-servers.js';

function config(servers: unknown[]): Record<string, unknown> {
  return {
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://login.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [
      { name: 'github', url: 'https://github.example.com/mcp' },
      { name: 'docs', url: 'https://docs.example.com/mcp' },
    ],
    servers,
  };
}

function fails(servers: unknown[], key: string, problem: RegExp): void {
  assert.throws(
    () => parseConfig(config(servers)),
    (err: unknown) => err instanceof ConfigError && err.key === key && problem.test(err.message),
  );
}

const bugs = { name: 'bugs', tools: [{ from: 'github.create_issue', as: 'file_bug', arguments: { owner: { value: 'acme' }, labels: { hide: true } } }] };

describe('the servers config block', () => {
  test('a valid server parses with its defaults', () => {
    const [server] = parseConfig(config([bugs])).servers;
    assert.equal(server!.name, 'bugs');
    assert.deepEqual(server!.prompts, []);
    assert.deepEqual(server!.tools[0]!.arguments, { owner: { value: 'acme' }, labels: { hide: true } });
    assert.deepEqual(parseConfig(config([])).servers, []);
  });

  test('a server named like a backend is a config error naming the key', () => {
    fails([{ ...bugs, name: 'github' }], 'servers[0].name', /already a backend's name/);
    fails([bugs, bugs], 'servers[1].name', /duplicate server name "bugs"/);
    fails([{ ...bugs, name: 'Bugs' }], 'servers[0].name', /\[a-z0-9-\]\+/);
  });

  test('every from must name a configured backend, in the {backend}.{name} form for tools and prompts', () => {
    fails([{ name: 'x', tools: [{ from: 'gitlab.create_issue' }] }], 'servers[0].tools[0].from', /names no configured backend \("gitlab"\)/);
    fails([{ name: 'x', prompts: [{ from: 'nope.p' }] }], 'servers[0].prompts[0].from', /names no configured backend/);
    fails([{ name: 'x', resources: [{ from: 'nope' }] }], 'servers[0].resources[0].from', /names no configured backend/);
    fails([{ name: 'x', tools: [{ from: 'create_issue' }] }], 'servers[0].tools[0].from', /\{backend\}\.\{name\}/);
  });

  test('an argument is either fixed or hidden; a name is offered once; a server offers something', () => {
    fails([{ name: 'x', tools: [{ from: 'github.a', arguments: { owner: { value: 'acme', hide: true } } }] }], 'servers[0].tools[0].arguments.owner', /exactly one of value/);
    fails([{ name: 'x', tools: [{ from: 'github.a', arguments: { owner: {} } }] }], 'servers[0].tools[0].arguments.owner', /exactly one of value/);
    fails([{ name: 'x', tools: [{ from: 'github.a', arguments: { owner: { hide: false } } }] }], 'servers[0].tools[0].arguments.owner.hide', /true/);
    fails([{ name: 'x', tools: [{ from: 'github.search' }, { from: 'docs.search' }] }], 'servers[0].tools[1].from', /"search" a second time/);
    fails([{ name: 'x', tools: [{ from: 'github.a', as: 'bad name' }] }], 'servers[0].tools[0].as', /MCP tool names/);
    fails([{ name: 'x' }], 'servers[0].tools', /at least one/);
  });
});

test('a virtual server is an endpoint of its own: its resource, and the scopes it requires and advertises', () => {
  const input = config([bugs]);
  const parsed = parseConfig({ ...input, auth: { ...(input.auth as object), requiredScopes: ['mcp'] }, backends: [{ name: 'github', url: 'https://github.example.com/mcp', access: { scopes: ['repo'] } }, { name: 'docs', url: 'https://docs.example.com/mcp' }] });
  assert.ok(allAudiences(parsed).includes('https://mcp.example.com/mcp/bugs'));
  const bugsEndpoint = namedEndpoints(parsed).find((e) => e.name === 'bugs');
  // A member whose scope the token lacks is left out (as on /mcp), so only the gateway's scopes are required; the member's are advertised.
  assert.deepEqual(bugsEndpoint, { name: 'bugs', required: ['mcp'], advertised: ['mcp', 'repo'] });
  assert.deepEqual(resourceScopes(parsed).get('https://mcp.example.com/mcp/bugs'), ['mcp', 'repo'], 'a resource indicator in broker mode too');
});

describe('a tool as a virtual server offers it', () => {
  const selection = new Selection(parseConfig(config([bugs])).servers[0]!, 0);
  const selected = selection.toolByOffered('file_bug')!;
  const tool = {
    name: 'github__create_issue',
    description: 'Creates an issue',
    inputSchema: { type: 'object', properties: { owner: { type: 'string' }, title: { type: 'string' }, labels: { type: 'array' } }, required: ['owner', 'title'] },
    outputSchema: { type: 'object', properties: { number: { type: 'number' } } },
    annotations: { title: 'Create issue', destructiveHint: false },
    _meta: { ui: { resourceUri: 'github+ui://form' } },
  };

  test('renamed, fixed and hidden arguments gone from properties and required, the rest kept', () => {
    const presented = presentTool(selected, tool);
    assert.ok('tool' in presented);
    assert.deepEqual(presented.tool, {
      ...tool,
      name: 'file_bug',
      inputSchema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] },
    });
  });

  test('hide on an argument the backend requires leaves the tool out, naming the key', () => {
    const presented = presentTool(selected, { ...tool, inputSchema: { ...tool.inputSchema, required: ['owner', 'labels'] } });
    assert.ok('problem' in presented);
    assert.match(presented.problem, /^servers\[0\]\.tools\[0\]\.arguments\.labels\.hide: .*requires this argument/);
  });

  test('a call gets the fixed value; a client value for a fixed or hidden argument is refused', () => {
    assert.deepEqual(callArguments(selected, { title: 'crash' }), { arguments: { title: 'crash', owner: 'acme' } });
    assert.deepEqual(callArguments(selected, undefined), { arguments: { owner: 'acme' } });
    assert.match((callArguments(selected, { title: 't', owner: 'evil' }) as { refused: string }).refused, /argument "owner" of tool "file_bug" is fixed/);
    assert.match((callArguments(selected, { title: 't', labels: [] }) as { refused: string }).refused, /argument "labels" of tool "file_bug" is not offered/);
  });

  test('resources: listed by prefix; a ui:// resource of a tool backend readable, not listed', () => {
    const withResources = new Selection(parseConfig(config([{ ...bugs, resources: [{ from: 'docs', uriPrefix: 'docs://public/' }] }])).servers[0]!, 0);
    assert.ok(withResources.listsResource('docs+docs://public/a'));
    assert.ok(!withResources.listsResource('docs+docs://private/a'));
    assert.ok(!withResources.listsResource('github+ui://form'));
    assert.ok(withResources.readsResource('github+ui://form'));
    assert.ok(!withResources.readsResource('docs+ui://form'), 'docs gives the server no tool');
    assert.deepEqual([...withResources.backends].sort(), ['docs', 'github']);
  });

  test('notifications are narrowed to what the server offers, per member', () => {
    const server = new Selection(parseConfig(config([{ ...bugs, resources: [{ from: 'docs', uriPrefix: 'docs://public/' }] }])).servers[0]!, 0);
    const note = (method: string, params?: unknown) => ({ method: `notifications/${method}`, params });
    assert.ok(server.keeps('github', note('tools/list_changed')), 'github gives the server a tool');
    assert.ok(!server.keeps('docs', note('tools/list_changed')), 'docs gives it none');
    assert.ok(!server.keeps('github', note('prompts/list_changed')), 'no prompt entry');
    assert.ok(server.keeps('docs', note('resources/list_changed')));
    assert.ok(!server.keeps('github', note('resources/list_changed')));
    assert.ok(server.keeps('docs', note('resources/updated', { uri: 'docs+docs://public/a' })));
    assert.ok(!server.keeps('docs', note('resources/updated', { uri: 'docs+docs://private/a' })));
    assert.ok(server.keeps('docs', note('progress', { progressToken: 1, progress: 1 })), 'messages about the client\'s own requests pass');
    assert.ok(server.keeps('docs', note('message', { level: 'info', data: 'x' })));
  });
});
