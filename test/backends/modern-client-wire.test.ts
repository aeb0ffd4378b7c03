/**
 * What goes over the wire between a 2025-11-25 client, the gateway and a 2026-07-28-only
 * backend (issue 42 §4 and §10), with real parts: the official SDK v1 client as the user, a
 * real gateway, and a v2 SDK server (`@modelcontextprotocol/server` 2.4.0, `legacy: 'reject'`)
 * that records the JSON-RPC id of every request it gets.
 *
 * - §4: a multi round-trip request's retry is a new request with a new id (SEP-2322); the
 *   client still gets its answer under its own id.
 * - §10: the client gets no field its revision does not have: no `resultType` on any result,
 *   no `ttlMs` / `cacheScope` on the cacheable ones. Both answer shapes are covered: an SSE
 *   answer (the v2 SDK's default for a call) and a JSON answer (`enableJsonResponse`).
 */
import assert from 'node:assert/strict';
import type http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createMcpHandler, inputRequired, McpServer, type ServerContext } from '@modelcontextprotocol/server';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { listenOnLoopback, loopbackEndpoint, readBody, sendWebResponse, toWebRequest } from '../fixtures/v2-node-handler.js';

interface Seen {
  id: unknown;
  method: unknown;
  retried: boolean;
}

interface Backend {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

function modernServer(): McpServer {
  const mcp = new McpServer({ name: 'wire-2026', version: '1.0.0' });
  mcp.registerTool('plain', { description: 'Answers at once' }, () => text('plain answer'));
  mcp.registerTool('confirm', { description: 'Asks for a confirmation first (MRTR)' }, ((ctx: ServerContext) => {
    const answer = ctx.mcpReq.inputResponses?.ok as { action?: string; content?: { ok?: boolean } } | undefined;
    if (answer) return text(`confirmed: ${String(answer.content?.ok)}`);
    return inputRequired({ inputRequests: { ok: inputRequired.elicit({ message: 'Go ahead?', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } }) } });
  }) as never);
  return mcp;
}

async function startBackend(json: boolean): Promise<Backend> {
  const seen: Seen[] = [];
  const handler = createMcpHandler(modernServer, { legacy: 'reject', ...(json ? { enableJsonResponse: true } : {}) } as never);
  const serve = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const body = await readBody(req);
    if (body) {
      const message = JSON.parse(body.toString('utf8')) as { id?: unknown; method?: unknown; params?: { inputResponses?: unknown } };
      seen.push({ id: message.id, method: message.method, retried: message.params?.inputResponses !== undefined });
    }
    const controller = new AbortController();
    res.on('close', () => controller.abort());
    await sendWebResponse(await handler.fetch(toWebRequest(req, body, controller.signal)), res);
  };
  const endpoint = loopbackEndpoint(await listenOnLoopback(serve), () => handler.close());
  return { ...endpoint, seen };
}

let oauth: OAuthHandle;
let sse: Backend;
let json: Backend;
let gateway: GatewayHandle;
const clients: Client[] = [];
/** The raw bodies of the gateway's answers to the clients, in order. */
const raw: string[] = [];

async function connect(backend: string): Promise<Client> {
  const token = await oauth.token({ sub: 'wire-user', aud: gateway.audience });
  const client = new Client({ name: 'wire-2025', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { ok: true } }));
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (init?.method === 'POST' && res.status === 200) void res.clone().text().then((t) => raw.push(t), () => {});
    return res;
  };
  await client.connect(new StreamableHTTPClientTransport(gateway.endpoint(backend), { fetch: recording, requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  clients.push(client);
  return client;
}

before(async () => {
  [oauth, sse, json] = await Promise.all([startOAuthServer(), startBackend(false), startBackend(true)]);
  gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'sse', url: sse.url }, { name: 'json', url: json.url }] });
});

after(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await gateway?.close();
  await Promise.allSettled([sse?.close(), json?.close(), oauth?.stop()]);
});

const FIELDS_2026 = ['resultType', 'ttlMs', 'cacheScope'];

function assertNo2026Fields(result: object, what: string): void {
  for (const field of FIELDS_2026) assert.equal(field in result, false, `${what}: no ${field} for a 2025-11-25 client (${JSON.stringify(result)})`);
}

for (const kind of ['sse', 'json'] as const) {
  describe(`a 2025-11-25 client of a 2026-07-28 backend answering ${kind === 'sse' ? 'SSE' : 'JSON'}`, () => {
    test('an input_required round is retried under a new id; the client gets its answer under its own', async () => {
      const backend = kind === 'sse' ? sse : json;
      const client = await connect(kind);
      const before = backend.seen.length;
      const result = await client.callTool({ name: 'confirm', arguments: {} });
      assert.deepEqual(result.content, [{ type: 'text', text: 'confirmed: true' }]);
      const calls = backend.seen.slice(before).filter((s) => s.method === 'tools/call');
      assert.equal(calls.length, 2, 'the call, then its retry with the answers');
      assert.deepEqual(calls.map((c) => c.retried), [false, true]);
      assert.notEqual(calls[0]!.id, undefined);
      assert.notDeepEqual(calls[1]!.id, calls[0]!.id, `the retry is a new request with a new id (SEP-2322): ${JSON.stringify(calls.map((c) => c.id))}`);
      assertNo2026Fields(result, 'the retried call');
    });

    test('results carry no field of 2026-07-28: resultType, ttlMs, cacheScope', async () => {
      const client = await connect(kind);
      raw.length = 0;
      const listed = await client.listTools();
      assert.deepEqual(listed.tools.map((t) => t.name).sort(), ['confirm', 'plain']);
      assertNo2026Fields(listed, 'tools/list');
      const called = await client.callTool({ name: 'plain', arguments: {} });
      assert.deepEqual(called.content, [{ type: 'text', text: 'plain answer' }]);
      assertNo2026Fields(called, 'tools/call');
      await new Promise((resolve) => setTimeout(resolve, 50));
      const bodies = raw.join('\n');
      assert.match(bodies, /plain answer/);
      for (const field of FIELDS_2026) assert.doesNotMatch(bodies, new RegExp(`"${field}"`), `no ${field} on the wire`);
    });
  });
}
