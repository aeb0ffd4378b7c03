/**
 * End to end through the gateway with the official SDK client and the MCP reference server
 * (server-everything): every message family of SPEC §1 must pass through unchanged, with
 * the session kept in the in-memory store and, in a second run of the same scenarios, in a
 * real Redis.
 *
 * The direct connection to server-everything (no gateway) is the reference for what
 * "relayed faithfully" means for initialize and tools/list.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type CallToolResult,
  type CreateMessageRequest,
  type ElicitRequest,
  type LoggingMessageNotification,
  type Progress,
  type ServerCapabilities,
  type Implementation,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { withDeadline } from '../helpers/deadline.js';

const ROOTS = [
  { uri: 'file:///srv/switchboard-test/project', name: 'Switchboard Test Project' },
  { uri: 'file:///srv/switchboard-test/notes', name: 'Notes' },
];
const SAMPLED_TEXT = 'Sampled answer from the test client: 42';
const SAMPLED_MODEL = 'switchboard-test-model';
const ELICITED = { name: 'Ada Lovelace', check: true, email: 'ada@example.com', integer: 7 };

/** An SDK client wired with recording handlers for every server→client feature. */
interface Probe {
  client: Client;
  transport: StreamableHTTPClientTransport;
  sampling: Array<CreateMessageRequest['params']>;
  elicitations: Array<ElicitRequest['params']>;
  rootsRequests: number;
  logs: Array<LoggingMessageNotification['params']>;
  updatedUris: string[];
  errors: Error[];
  close(): Promise<void>;
}

async function connectProbe(url: URL, token: string | undefined): Promise<Probe> {
  const client = new Client(
    { name: 'switchboard-proxy-test', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: token ? { headers: { Authorization: `Bearer ${token}` } } : {},
  });
  const probe: Probe = {
    client,
    transport,
    sampling: [],
    elicitations: [],
    rootsRequests: 0,
    logs: [],
    updatedUris: [],
    errors: [],
    close: async () => {
      await client.close().catch(() => {});
    },
  };
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    probe.sampling.push(request.params);
    return { model: SAMPLED_MODEL, role: 'assistant', stopReason: 'endTurn', content: { type: 'text', text: SAMPLED_TEXT } };
  });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    probe.elicitations.push(request.params);
    return { action: 'accept', content: { ...ELICITED } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    probe.rootsRequests++;
    return { roots: ROOTS };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    probe.logs.push(n.params);
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    probe.updatedUris.push(n.params.uri);
  });
  client.onerror = (err) => {
    probe.errors.push(err);
  };
  await withDeadline(client.connect(transport), 15_000, 'client.connect');
  return probe;
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
async function waitFor<T>(what: string, check: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}


function textOf(result: CallToolResult | Record<string, unknown>): string {
  const content = (result as CallToolResult).content ?? [];
  return content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

async function listAllTools(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 20; page++) {
    const result = await client.listTools(cursor ? { cursor } : {});
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) return tools;
  }
  throw new Error('tools/list kept returning a nextCursor after 20 pages');
}

let oauth: OAuthHandle | undefined;
let everything: EverythingHandle | undefined;
/** What server-everything says when spoken to directly. */
let reference: { serverVersion: Implementation; capabilities: ServerCapabilities; instructions?: string; tools: Tool[] } | undefined;

before(async () => {
  [oauth, everything] = await Promise.all([startOAuthServer(), startEverything()]);
  const direct = await connectProbe(new URL(everything.url), undefined);
  try {
    reference = {
      serverVersion: direct.client.getServerVersion()!,
      capabilities: direct.client.getServerCapabilities()!,
      instructions: direct.client.getInstructions(),
      tools: await listAllTools(direct.client),
    };
    await direct.transport.terminateSession().catch(() => {});
  } finally {
    await direct.close();
  }
});

after(async () => {
  await Promise.allSettled([oauth?.stop(), everything?.stop()]);
});

for (const storeKind of ['memory', 'redis'] as const) {
  describe(`MCP through the gateway to server-everything (${storeKind} store)`, () => {
    let redis: RedisHandle | undefined;
    let gateway: GatewayHandle | undefined;
    let token = '';
    let probe: Probe | undefined;

    const p = (): Probe => {
      assert.ok(probe, 'the client session was not set up');
      return probe;
    };

    before(async () => {
      if (storeKind === 'redis') redis = await startRedis();
      gateway = await startGateway({
        issuer: oauth!.issuer,
        backends: [{ name: 'everything', url: everything!.url, timeout: '30s' }],
        redisUrl: redis?.url,
      });
      token = await oauth!.token({ sub: `alice-${storeKind}`, aud: gateway.audience });
      probe = await connectProbe(gateway.endpoint('everything'), token);
    });

    after(async () => {
      await probe?.close();
      await gateway?.close();
      await redis?.stop();
    });

    test(`the gateway really uses the ${storeKind} store`, async () => {
      assert.equal(gateway!.app.mcp.store.kind, storeKind);
      if (storeKind !== 'redis') return;
      const prefix = gateway!.config.redis!.keyPrefix;
      const inspect = new Redis(redis!.url, { maxRetriesPerRequest: 0, lazyConnect: true });
      inspect.on('error', () => {});
      try {
        await inspect.connect();
        const keys = await inspect.keys(`${prefix}*`);
        assert.ok(keys.some((k) => k.startsWith(`${prefix}s:`)), `no session key under ${prefix} in Redis: ${JSON.stringify(keys)}`);
      } finally {
        inspect.disconnect();
      }
    });

    test('initialize: server info, capabilities and instructions are relayed unchanged', () => {
      const { client, transport } = p();
      assert.ok(transport.sessionId, 'the gateway issued an Mcp-Session-Id');
      assert.match(transport.sessionId, /^[A-Za-z0-9_-]{43}$/);
      assert.equal(transport.protocolVersion, '2025-11-25');
      assert.deepEqual(client.getServerVersion(), reference!.serverVersion);
      assert.equal(client.getServerVersion()?.name, 'mcp-servers/everything');
      assert.deepEqual(client.getServerCapabilities(), reference!.capabilities);
      assert.ok(client.getServerCapabilities()?.resources?.subscribe);
      assert.ok(client.getServerCapabilities()?.logging);
      assert.equal(client.getInstructions(), reference!.instructions);
      assert.ok((client.getInstructions() ?? '').length > 0);
    });

    test('tools/list: every page, identical to the direct listing', async () => {
      const tools = await listAllTools(p().client);
      const names = tools.map((t) => t.name).sort();
      for (const expected of [
        'echo',
        'get-sum',
        'trigger-long-running-operation',
        'trigger-sampling-request',
        'trigger-elicitation-request',
        'get-roots-list',
        'toggle-simulated-logging',
        'toggle-subscriber-updates',
      ]) {
        assert.ok(names.includes(expected), `tools/list lacks ${expected}: ${names.join(', ')}`);
      }
      const byName = (list: Tool[]) => Object.fromEntries(list.map((t) => [t.name, t]));
      assert.deepEqual(byName(tools), byName(reference!.tools));
    });

    test('tools/call: echo and get-sum', async () => {
      const { client } = p();
      const echo = await client.callTool({ name: 'echo', arguments: { message: 'héllo through Switchboard ✓' } });
      assert.equal(textOf(echo), 'Echo: héllo through Switchboard ✓');
      const sum = await client.callTool({ name: 'get-sum', arguments: { a: 19, b: 23 } });
      assert.equal(textOf(sum), 'The sum of 19 and 23 is 42.');
    });

    test('tools/call with invalid arguments comes back as the backend judged it', async () => {
      const result = await p().client.callTool({ name: 'get-sum', arguments: { a: 'not a number', b: 1 } });
      assert.equal(result.isError, true);
      assert.match(textOf(result), /Input validation error|Invalid/i);
    });

    test('resources: list, read, templates/list, read through a template', async () => {
      const { client } = p();
      const listed = await client.listResources();
      assert.ok(listed.resources.length > 0, 'resources/list returned nothing');
      const doc = listed.resources.find((r) => r.uri.startsWith('demo://resource/static/document/'));
      assert.ok(doc, `no static document among ${listed.resources.map((r) => r.uri).join(', ')}`);
      const read = await client.readResource({ uri: doc.uri });
      assert.equal(read.contents.length, 1);
      assert.equal(read.contents[0]!.uri, doc.uri);
      const docText = (read.contents[0] as { text?: unknown }).text;
      assert.ok(typeof docText === 'string' && docText.length > 0, 'the document has text');

      const templates = await client.listResourceTemplates();
      const uriTemplates = templates.resourceTemplates.map((t) => t.uriTemplate);
      assert.ok(uriTemplates.includes('demo://resource/dynamic/text/{resourceId}'), uriTemplates.join(', '));
      const dynamic = await client.readResource({ uri: 'demo://resource/dynamic/text/7' });
      assert.equal(dynamic.contents[0]!.uri, 'demo://resource/dynamic/text/7');
      assert.match(String((dynamic.contents[0] as { text?: unknown }).text), /^Resource 7: This is a plaintext resource/);
      const blob = await client.readResource({ uri: 'demo://resource/dynamic/blob/3' });
      assert.match(Buffer.from(String((blob.contents[0] as { blob?: unknown }).blob), 'base64').toString('utf8'), /^Resource 3: This is a base64 blob/);
    });

    test('prompts: list and get with arguments', async () => {
      const { client } = p();
      const { prompts } = await client.listPrompts();
      const names = prompts.map((x) => x.name);
      assert.ok(names.includes('args-prompt') && names.includes('completable-prompt'), names.join(', '));
      const argsPrompt = prompts.find((x) => x.name === 'args-prompt')!;
      assert.deepEqual(argsPrompt.arguments?.map((a) => [a.name, Boolean(a.required)]), [
        ['city', true],
        ['state', false],
      ]);
      const got = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Lyon', state: 'Rhône' } });
      assert.equal(got.messages.length, 1);
      assert.deepEqual(got.messages[0]!.content, { type: 'text', text: "What's weather in Lyon, Rhône?" });
    });

    test('completion/complete for prompt arguments, with context', async () => {
      const { client } = p();
      assert.ok(client.getServerCapabilities()?.completions, 'server-everything declares completions');
      const department = await client.complete({
        ref: { type: 'ref/prompt', name: 'completable-prompt' },
        argument: { name: 'department', value: 'Eng' },
      });
      assert.deepEqual(department.completion.values, ['Engineering']);
      const member = await client.complete({
        ref: { type: 'ref/prompt', name: 'completable-prompt' },
        argument: { name: 'name', value: '' },
        context: { arguments: { department: 'Sales' } },
      });
      assert.deepEqual(member.completion.values, ['David', 'Eve', 'Frank']);
      const template = await client.complete({
        ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' },
        argument: { name: 'resourceId', value: '12' },
      });
      assert.deepEqual(template.completion.values, ['12']);
    });

    test('sampling: the client handler answers the backend, and the answer reaches the tool result', async () => {
      const probe = p();
      const before = probe.sampling.length;
      const result = await withDeadline(
        probe.client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'What is six times seven?', maxTokens: 33 } }),
        15_000,
        'trigger-sampling-request',
      );
      assert.equal(probe.sampling.length, before + 1, 'the createMessage handler was called once');
      const request = probe.sampling.at(-1)!;
      assert.equal(request.maxTokens, 33);
      assert.equal(request.systemPrompt, 'You are a helpful test server.');
      const first = request.messages[0]!;
      assert.equal(first.role, 'user');
      assert.match(JSON.stringify(first.content), /What is six times seven\?/);
      const text = textOf(result);
      assert.match(text, /LLM sampling result/);
      assert.ok(text.includes(SAMPLED_TEXT), `tool result lacks the sampled text: ${text}`);
      assert.ok(text.includes(SAMPLED_MODEL), `tool result lacks the model: ${text}`);
    });

    test('form elicitation: the client accepts with content, and the tool result reflects it', async () => {
      const probe = p();
      const before = probe.elicitations.length;
      const result = await withDeadline(
        probe.client.callTool({ name: 'trigger-elicitation-request', arguments: {} }),
        15_000,
        'trigger-elicitation-request',
      );
      assert.equal(probe.elicitations.length, before + 1, 'the elicitation handler was called once');
      const params = probe.elicitations.at(-1)! as { message: string; requestedSchema?: { properties?: Record<string, unknown> }; mode?: string };
      assert.notEqual(params.mode, 'url');
      assert.match(params.message, /Please provide inputs/);
      assert.ok(params.requestedSchema?.properties?.name, 'the requested schema came through');
      const text = textOf(result);
      assert.match(text, /User provided the requested information/);
      assert.match(text, /- Name: Ada Lovelace/);
      assert.match(text, /- Agreed to terms: true/);
      assert.match(text, /- Email: ada@example\.com/);
      assert.match(text, /- Favorite Integer: 7/);
    });

    test('roots/list: get-roots-list returns the roots the client gave', async () => {
      const probe = p();
      const result = await withDeadline(probe.client.callTool({ name: 'get-roots-list', arguments: {} }), 15_000, 'get-roots-list');
      const text = textOf(result);
      assert.ok(probe.rootsRequests >= 1, 'the client was asked for roots/list');
      assert.match(text, /Current MCP Roots \(2 total\)/);
      for (const root of ROOTS) {
        assert.ok(text.includes(root.name) && text.includes(root.uri), `missing root ${root.uri} in: ${text}`);
      }
    });

    test('progress: notifications arrive in order during trigger-long-running-operation', async () => {
      const seen: Progress[] = [];
      const result = await withDeadline(
        p().client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } }, undefined, {
          onprogress: (progress) => seen.push(progress),
        }),
        15_000,
        'trigger-long-running-operation',
      );
      assert.match(textOf(result), /Long running operation completed\. Duration: 1 seconds, Steps: 4\./);
      assert.deepEqual(
        seen.map((x) => x.progress),
        [1, 2, 3, 4],
      );
      assert.ok(seen.every((x) => x.total === 4));
    });

    test('logging: logging/setLevel, then simulated log messages arrive as notifications/message', async () => {
      const probe = p();
      await probe.client.setLoggingLevel('debug');
      const start = probe.logs.length;
      const simulated = (entry: LoggingMessageNotification['params']) => /level[- ]message/i.test(String(entry.data));
      const on = await probe.client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
      assert.match(textOf(on), /Started simulated, random-leveled logging/);
      try {
        const entry = await waitFor('a simulated notifications/message', () => probe.logs.slice(start).find(simulated), 8_000);
        assert.ok(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'].includes(entry.level));
      } finally {
        const off = await probe.client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
        assert.match(textOf(off), /Stopped simulated logging/);
      }
    });

    test('logging/setLevel is honoured by the backend (level emergency filters the simulated messages)', async () => {
      const probe = p();
      await probe.client.setLoggingLevel('emergency');
      // Subscribe acknowledgements are `info` log messages: at `emergency` they must not come.
      const start = probe.logs.length;
      await probe.client.subscribeResource({ uri: 'demo://resource/dynamic/text/1' });
      await probe.client.unsubscribeResource({ uri: 'demo://resource/dynamic/text/1' });
      await probe.client.callTool({ name: 'echo', arguments: { message: 'flush' } });
      assert.deepEqual(
        probe.logs.slice(start).filter((l) => l.level !== 'emergency'),
        [],
      );
      await probe.client.setLoggingLevel('debug');
    });

    test('cancellation: an aborted call rejects promptly and the session keeps working', async () => {
      const { client } = p();
      const controller = new AbortController();
      let firstProgress!: () => void;
      const progressed = new Promise<void>((resolve) => (firstProgress = resolve));
      const call = client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 40 } }, undefined, {
        signal: controller.signal,
        onprogress: () => firstProgress(),
      });
      call.catch(() => {});
      await withDeadline(progressed, 10_000, 'the first progress notification');
      const abortedAt = Date.now();
      controller.abort(new Error('cancelled by the test'));
      await assert.rejects(withDeadline(call, 2_000, 'the aborted call'), /cancelled by the test/);
      assert.ok(Date.now() - abortedAt < 2_000);

      const echo = await withDeadline(client.callTool({ name: 'echo', arguments: { message: 'still here' } }), 5_000, 'echo after cancel');
      assert.equal(textOf(echo), 'Echo: still here');
      const sum = await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } });
      assert.equal(textOf(sum), 'The sum of 1 and 2 is 3.');
    });

    test('resource subscription: notifications/resources/updated arrives, then unsubscribe', async () => {
      const probe = p();
      const uri = 'demo://resource/dynamic/text/5';
      await probe.client.subscribeResource({ uri });
      const start = probe.updatedUris.length;
      const on = await probe.client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
      assert.match(textOf(on), /Started simulated resource updated notifications/);
      try {
        await waitFor(`notifications/resources/updated for ${uri}`, () => (probe.updatedUris.slice(start).includes(uri) ? true : undefined), 12_000);
      } finally {
        await probe.client.unsubscribeResource({ uri });
        const off = await probe.client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
        assert.match(textOf(off), /Stopped simulated resource updates/);
      }
    });

    test('ping passes through', async () => {
      assert.deepEqual(await p().client.ping(), {});
    });

    test('the client saw no transport or protocol errors along the way', () => {
      // A cancelled operation may still report progress for a token the client forgot; that is the backend's business.
      const unexpected = p().errors.filter((e) => !/progress notification for an unknown token/.test(e.message));
      assert.deepEqual(
        unexpected.map((e) => e.message),
        [],
      );
    });

    test('DELETE ends the session: a later request with its id gets 404', async () => {
      const { transport } = p();
      const sessionId = transport.sessionId;
      assert.ok(sessionId);
      await withDeadline(transport.terminateSession(), 5_000, 'terminateSession');
      assert.equal(transport.sessionId, undefined);

      const res = await fetch(gateway!.endpoint('everything'), {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-session-id': sessionId,
          'mcp-protocol-version': '2025-11-25',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/list', params: {} }),
        signal: AbortSignal.timeout(5_000),
      });
      const body = (await res.json()) as { error?: { code: number } };
      assert.equal(res.status, 404);
      assert.equal(typeof body.error?.code, 'number');
    });
  });
}
