/**
 * The gateway as the 2026-07-28 client of a backend whose tools mirror arguments into headers
 * (issue 42 §2, §3; Transports §Custom Headers from Tool Parameters), with real parts: the
 * official SDK v1 client as a 2025-11-25 user, the v2 client (`@modelcontextprotocol/client`
 * 2.4.0) as a 2026-07-28 one, a real gateway, and a plain v2 SDK server
 * (`@modelcontextprotocol/server` 2.4.0, `legacy: 'reject'`) that validates `Mcp-Param-*`
 * against the body as the SDK does (400 -32020 when one is missing or differs).
 *
 * - §2: a 2025-11-25 client's `lookup` (region → `Mcp-Param-Region`) works on `/mcp/geo`, on
 *   `/mcp`, through a virtual server that fixes the region, and through tool search's
 *   `call_tool`; integers and booleans at a nested path and a non-ASCII value go in their
 *   forms; a call with no list before it is mirrored too.
 * - §3: a tool with an invalid mark (`x-mcp-header` on a `number`) is left out of a bridged
 *   client's lists and its call refused, saying why; a 2026 client on `/mcp/geo` gets it as the
 *   backend sent it.
 */
import assert from 'node:assert/strict';
import type http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Client as V2Client, StreamableHTTPClientTransport as V2Transport } from '@modelcontextprotocol/client';
import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server';
import { withDeadline } from '../helpers/deadline.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { listenOnLoopback, loopbackEndpoint, readBody, sendWebResponse, toWebRequest } from '../fixtures/v2-node-handler.js';

type Json = Record<string, unknown>;

/** A `tools/call` as the backend got it: the tool, its arguments, its `Mcp-Param-*` headers. */
interface SeenCall {
  tool: string;
  args: Json;
  params: Record<string, string>;
}

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });
// x-mcp-header is an MCP extension keyword, unknown to the JSON Schema type.
const mark = (name: string) => ({ 'x-mcp-header': name });

function geoServer(): McpServer {
  const mcp = new McpServer({ name: 'geo', version: '1.0.0' });
  mcp.registerTool(
    'lookup',
    {
      description: 'Looks a place up in a region',
      inputSchema: fromJsonSchema<{ region: string; query: string }>({ type: 'object', properties: { region: { type: 'string', ...mark('Region') }, query: { type: 'string' } }, required: ['region', 'query'] } as never),
    },
    ({ region, query }) => text(`${query} in ${region}`),
  );
  mcp.registerTool(
    'count',
    {
      description: 'Counts, with options at a nested path',
      inputSchema: fromJsonSchema<Json>({
        type: 'object',
        properties: { label: { type: 'string', ...mark('Label') }, opts: { type: 'object', properties: { limit: { type: 'integer', ...mark('Limit') }, exact: { type: 'boolean', ...mark('Exact') } } } },
      } as never),
    },
    (args) => text(`counted ${JSON.stringify(args)}`),
  );
  mcp.registerTool(
    'pay',
    {
      description: 'An x-mcp-header on a number: not permitted (§Schema Extension)',
      inputSchema: fromJsonSchema<{ amount: number }>({ type: 'object', properties: { amount: { type: 'number', ...mark('Amount') } }, required: ['amount'] } as never),
    },
    ({ amount }) => text(`paid ${amount}`),
  );
  mcp.registerTool(
    'moved',
    {
      description: 'Its mark changes while the session lasts',
      inputSchema: fromJsonSchema<{ place: string }>({ type: 'object', properties: { place: { type: 'string', ...mark(flapping ? `Flap${++flaps}` : movedMark) } }, required: ['place'] } as never),
    },
    ({ place }) => text(`moved to ${place}`),
  );
  return mcp;
}

/** The mark of `moved` now (the server is made per request, so a change shows at once). */
let movedMark = 'Zone';
/** While set, the mark of `moved` changes on every request (the factory runs per request): each call is refused with -32020. */
let flapping = false;
let flaps = 0;

let oauth: OAuthHandle;
let gateway: GatewayHandle;
let backend: { url: string; close(): Promise<void> };
const seen: SeenCall[] = [];
const closers: Array<() => Promise<unknown>> = [];

async function startGeo(): Promise<{ url: string; close(): Promise<void> }> {
  // The SDK's own warning for the invalid tool it still lists (a conforming client excludes it).
  const warn = console.warn;
  console.warn = (...args: unknown[]) => void (String(args[0]).includes('x-mcp-header') ? undefined : warn(...args));
  closers.push(async () => void (console.warn = warn));
  const handler = createMcpHandler(geoServer, { legacy: 'reject' } as never);
  const serve = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const body = await readBody(req);
    const message = body ? (JSON.parse(body.toString('utf8')) as { method?: string; params?: { name?: string; arguments?: Json } }) : undefined;
    if (message?.method === 'tools/call') {
      const params = Object.fromEntries(Object.entries(req.headers).filter(([name]) => name.startsWith('mcp-param-')).map(([name, value]) => [name, String(value)]));
      seen.push({ tool: String(message.params?.name), args: message.params?.arguments ?? {}, params });
    }
    const controller = new AbortController();
    res.on('close', () => controller.abort());
    await sendWebResponse(await handler.fetch(toWebRequest(req, body, controller.signal)), res);
  };
  return loopbackEndpoint(await listenOnLoopback(serve), () => handler.close());
}

before(async () => {
  [oauth, backend] = await Promise.all([startOAuthServer(), startGeo()]);
  gateway = await startGateway({
    issuer: oauth.issuer,
    backends: [{ name: 'geo', url: backend.url }],
    overrides: {
      servers: [
        { name: 'geo-eu', tools: [{ from: 'geo.lookup', as: 'lookup_eu', arguments: { region: { value: 'eu-west' } } }, { from: 'geo.pay' }] },
        { name: 'geo-search', discovery: { threshold: 1 }, tools: [{ from: 'geo.lookup', as: 'find_eu', arguments: { region: { value: 'eu-north' } } }, { from: 'geo.count' }, { from: 'geo.pay' }] },
      ],
    } as never,
  });
});

after(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  // The gateway first, the backend still up: its close cuts the backend listen it holds for a 2026
  // client bridged by /mcp (it waited for ever on it before backend.close(graceMs)).
  await withDeadline(gateway!.close(), gateway!.config.shutdown.drainTimeout + 5_000, 'the gateway\'s close while the backend holds a listen open');
  await backend?.close();
  await oauth?.stop();
});

/** A 2025-11-25 client of `/mcp/{endpoint}` (`''`: `/mcp`). */
async function client2025(endpoint: string): Promise<Client> {
  const token = await oauth.token({ sub: 'geo-user', aud: gateway.audience });
  const client = new Client({ name: 'geo-2025', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(endpoint ? gateway.endpoint(endpoint) : new URL(gateway.audience), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  closers.push(() => client.close());
  return client;
}

function textOf(result: unknown): string {
  const content = (result as CallToolResult).content;
  assert.ok(!(result as CallToolResult).isError, `no error: ${JSON.stringify(result)}`);
  return content.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

/** The calls the backend got while `run` ran. */
async function callsDuring(run: () => Promise<unknown>): Promise<SeenCall[]> {
  const from = seen.length;
  await run();
  return seen.slice(from);
}

describe('a 2025-11-25 client calls a tool whose argument the backend mirrors into a header', () => {
  test('on /mcp/geo: Mcp-Param-Region is sent, the backend answers', async () => {
    const client = await client2025('geo');
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'lookup'));
    let result: unknown;
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'lookup', arguments: { region: 'eu-west', query: 'Lyon' } })));
    assert.equal(textOf(result), 'Lyon in eu-west');
    assert.deepEqual(calls, [{ tool: 'lookup', args: { region: 'eu-west', query: 'Lyon' }, params: { 'mcp-param-region': 'eu-west' } }]);
  });

  test('on /mcp/geo without a tools/list first: the gateway reads the tools for the session, then calls', async () => {
    const client = await client2025('geo');
    let result: unknown;
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'lookup', arguments: { region: 'ap-south', query: 'Pune' } })));
    assert.equal(textOf(result), 'Pune in ap-south');
    assert.deepEqual(calls.map((c) => c.params), [{ 'mcp-param-region': 'ap-south' }]);
  });

  test('integers and booleans at a nested path, a non-ASCII value Base64-encoded, an absent one left out', async () => {
    const client = await client2025('geo');
    let result: unknown;
    const args = { label: 'Grüße', opts: { limit: 42, exact: false } };
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'count', arguments: args })));
    assert.match(textOf(result), /counted/);
    const label = `=?base64?${Buffer.from('Grüße', 'utf8').toString('base64')}?=`;
    assert.deepEqual(calls[0]!.params, { 'mcp-param-label': label, 'mcp-param-limit': '42', 'mcp-param-exact': 'false' });
    const fewer = await callsDuring(() => client.callTool({ name: 'count', arguments: { opts: { limit: -7 } } }));
    assert.deepEqual(fewer[0]!.params, { 'mcp-param-limit': '-7' });
  });

  test('on /mcp: the renamed tool geo__lookup carries the backend\'s header', async () => {
    const client = await client2025('');
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'geo__lookup'));
    let result: unknown;
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'geo__lookup', arguments: { region: 'us-east', query: 'Boston' } })));
    assert.equal(textOf(result), 'Boston in us-east');
    assert.deepEqual(calls.map((c) => c.params), [{ 'mcp-param-region': 'us-east' }]);
  });

  test('through a virtual server that fixes the region: the fixed value is mirrored', async () => {
    const client = await client2025('geo-eu');
    let result: unknown;
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'lookup_eu', arguments: { query: 'Paris' } })));
    assert.equal(textOf(result), 'Paris in eu-west');
    assert.deepEqual(calls, [{ tool: 'lookup', args: { query: 'Paris', region: 'eu-west' }, params: { 'mcp-param-region': 'eu-west' } }]);
  });

  test('through tool search\'s call_tool, the region fixed by the virtual server', async () => {
    const client = await client2025('geo-search');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['search_tools', 'call_tool']);
    let result: unknown;
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'call_tool', arguments: { name: 'find_eu', arguments: { query: 'Oslo' } } })));
    assert.equal(textOf(result), 'Oslo in eu-north');
    assert.deepEqual(calls.map((c) => c.params), [{ 'mcp-param-region': 'eu-north' }]);
  });
});

describe('a 2026-07-28 client the gateway bridges (on /mcp)', () => {
  test('its call of geo__lookup reaches the backend with the header the gateway mirrored; the invalid tool is left out', async () => {
    const token = await oauth.token({ sub: 'geo-user', aud: gateway.audience });
    const client = new V2Client({ name: 'geo-2026', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } } as never);
    await client.connect(new V2Transport(new URL(gateway.audience), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    closers.push(() => client.close());
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['geo__count', 'geo__lookup', 'geo__moved']);
    let result: unknown;
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'geo__lookup', arguments: { region: 'sa-east', query: 'Lima' } })));
    assert.equal(textOf(result), 'Lima in sa-east');
    assert.deepEqual(calls.map((c) => c.params), [{ 'mcp-param-region': 'sa-east' }]);
  });
});

describe('a tool whose mark changed since the session listed it', () => {
  test('the backend refuses the old header (-32020); the gateway reads the tools again and the call goes through', async () => {
    const client = await client2025('geo');
    await client.listTools();
    movedMark = 'Area';
    let result: unknown;
    const calls = await callsDuring(async () => (result = await client.callTool({ name: 'moved', arguments: { place: 'Rome' } })));
    assert.equal(textOf(result), 'moved to Rome');
    assert.deepEqual(calls.map((c) => c.params), [{ 'mcp-param-zone': 'Rome' }, { 'mcp-param-area': 'Rome' }], 'the call with the header of the list, then again with the new one');
  });
});

describe('a tool with an invalid x-mcp-header annotation', () => {
  const refusedWhy = /tool "pay" of backend "geo" has an invalid x-mcp-header annotation.*amount: x-mcp-header is only allowed on a string, integer or boolean property/;

  for (const [endpoint, name] of [['geo', 'pay'], ['', 'geo__pay'], ['geo-eu', 'pay']] as const) {
    test(`is left out of a 2025-11-25 client's list on /mcp${endpoint ? `/${endpoint}` : ''} and its call refused, saying why`, async () => {
      const client = await client2025(endpoint);
      const { tools } = await client.listTools();
      assert.ok(tools.length > 0);
      assert.ok(!tools.some((t) => t.name === name), `no ${name} in ${JSON.stringify(tools.map((t) => t.name))}`);
      const calls = await callsDuring(async () => {
        const error = await client.callTool({ name, arguments: { amount: 5 } }).then(
          (r) => assert.fail(`refused, not ${JSON.stringify(r)}`),
          (err: { code?: number; message?: string }) => err,
        );
        assert.equal(error.code, -32010);
        assert.match(String(error.message), refusedWhy);
      });
      assert.deepEqual(calls, [], 'the backend never got the call');
    });
  }

  test('a 2026-07-28 client on /mcp/geo gets the tool as the backend sent it', async () => {
    const token = await oauth.token({ sub: 'geo-user', aud: gateway.audience });
    const lists: string[] = [];
    const recording: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (typeof init?.body === 'string' && init.body.includes('"tools/list"')) lists.push(await res.clone().text());
      return res;
    };
    const client = new V2Client({ name: 'geo-2026', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } } as never);
    const warn = console.warn;
    console.warn = () => {};
    try {
      await client.connect(new V2Transport(gateway.endpoint('geo'), { fetch: recording, requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
      closers.push(() => client.close());
      await client.listTools();
    } finally {
      console.warn = warn;
    }
    const wire = lists.join('\n');
    assert.match(wire, /"name":"pay"/, 'the tool reaches the 2026 client as sent');
    assert.match(wire, /"x-mcp-header":"Amount"/);
    const calls = await callsDuring(() => client.callTool({ name: 'lookup', arguments: { region: 'eu-west', query: 'Nice' } }));
    assert.deepEqual(calls.map((c) => c.params), [{ 'mcp-param-region': 'eu-west' }], 'its own headers pass');
  });
});

describe('a backend\'s own JSON-RPC error reaches a 2025-11-25 client as the backend wrote it (issue 42 cause 9)', () => {
  /** The tool's mark changes between every list and call, so the backend refuses each call with 400 -32020, even the gateway's retry. */
  async function refusedCall(endpoint: string, name: string): Promise<{ code?: number; message?: string; data?: Json }> {
    const client = await client2025(endpoint);
    await client.listTools();
    flapping = true;
    try {
      return await client.callTool({ name, arguments: { place: 'Oslo' } }).then(
        (r) => assert.fail(`refused, not ${JSON.stringify(r)}`),
        (err: { code?: number; message?: string; data?: Json }) => err,
      );
    } finally {
      flapping = false;
    }
  }

  for (const [endpoint, name] of [['geo', 'moved'], ['', 'geo__moved']] as const) {
    test(`on /mcp${endpoint ? `/${endpoint}` : ''}: the backend's -32020 under the client's id, the backend named in data`, async () => {
      const error = await refusedCall(endpoint, name);
      assert.equal(error.code, -32020, `the backend's code, not the gateway's: ${JSON.stringify(error)}`);
      assert.match(String(error.message), /Mcp-Param-Flap/i, 'the backend\'s message');
      if (!endpoint) assert.equal(error.data?.backend, 'geo', `the backend named in data: ${JSON.stringify(error.data)}`);
    });
  }
});

