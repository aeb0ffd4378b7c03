/**
 * Runs the official MCP conformance suite (server mode) directly against the conformance
 * fixture (test/fixtures/conformance-server.ts), and checks the test-only token proxy
 * (test/helpers/token-proxy.ts) that the through-the-gateway run relies on.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ACTIVE_SERVER_SCENARIOS,
  PENDING_SERVER_SCENARIOS,
  formatConformanceTable,
  runConformance,
  startConformanceServer,
  stopConformanceCli,
  type ConformanceServer,
} from '../helpers/conformance.js';
import { parseSseBlock as parseBlock } from '../helpers/sse-client.js';
import { startTokenProxy, type TokenProxy } from '../helpers/token-proxy.js';

/**
 * Active scenarios that cannot pass against an SDK 1.32 server, with the reason.
 * Currently none: the fixture passes every scenario of conformance 0.1.16.
 */
const KNOWN_DIRECT_FAILURES = new Map<string, string>();

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  await stopConformanceCli().catch(() => {});
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

async function fixture(opts?: Parameters<typeof startConformanceServer>[0]): Promise<ConformanceServer> {
  const server = await startConformanceServer(opts);
  cleanups.push(() => server.stop());
  return server;
}

async function proxy(target: string, token: string | (() => Promise<string>)): Promise<TokenProxy> {
  const p = await startTokenProxy(target, token);
  cleanups.push(() => p.close());
  return p;
}

// ---------------------------------------------------------------------------
// SSE helpers for raw fetch tests
// ---------------------------------------------------------------------------

interface SseEvent {
  id?: string;
  event?: string;
  retry?: number;
  data: string;
  /** ms since the request was sent */
  at: number;
}

function parseSseBlock(block: string, at: number): SseEvent | undefined {
  const ev = parseBlock(block);
  return ev ? { ...ev, data: ev.data ?? '', at } : undefined;
}

/** Reads SSE events, stamping each with its arrival time, until `until(event)` or the stream ends. */
async function readSse(
  res: Response,
  startedAt: number,
  until: (e: SseEvent) => boolean = () => false,
): Promise<SseEvent[]> {
  assert.ok(res.body, 'response has a body');
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const events: SseEvent[] = [];
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return events;
      buffer += value;
      let m: RegExpExecArray | null;
      while ((m = /\r?\n\r?\n/.exec(buffer))) {
        const block = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        const ev = parseSseBlock(block, performance.now() - startedAt);
        if (!ev) continue;
        events.push(ev);
        if (until(ev)) return events;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

const jsonOf = (e: SseEvent): Record<string, unknown> | undefined => {
  try {
    return e.data ? (JSON.parse(e.data) as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
};

// ---------------------------------------------------------------------------

describe('conformance suite directly against the fixture', () => {
  test('every scenario passes (active suite asserted; pending ones too)', { timeout: 200_000 }, async () => {
    const server = await fixture();
    const results = await runConformance(server.url, { suite: 'all', timeoutMs: 180_000 });
    console.log(`\nconformance (direct, ${server.url}):\n${formatConformanceTable(results)}\n`);

    for (const scenario of ACTIVE_SERVER_SCENARIOS) {
      const result = results.get(scenario);
      assert.ok(result, `active scenario ${scenario} missing from the results`);
      if (KNOWN_DIRECT_FAILURES.has(scenario)) continue;
      assert.ok(
        result.passed,
        `${scenario} failed: ${JSON.stringify(result.checks.filter((c) => c.status === 'FAILURE'))}`,
      );
    }
    for (const scenario of PENDING_SERVER_SCENARIOS) {
      const result = results.get(scenario);
      assert.ok(result, `pending scenario ${scenario} missing from the results`);
      assert.ok(result.passed, `${scenario} failed: ${JSON.stringify(result.checks)}`);
    }
    // Every scenario the CLI ran is one we know about (catches a changed suite).
    for (const scenario of results.keys()) {
      assert.ok(
        ACTIVE_SERVER_SCENARIOS.includes(scenario) || PENDING_SERVER_SCENARIOS.includes(scenario),
        `unexpected scenario ${scenario}`,
      );
    }
    // SEP-1699: the fixture really closed the stream and resumed on GET + Last-Event-ID.
    const polling = results.get('server-sse-polling')!;
    assert.equal(polling.checks.find((c) => c.id === 'server-sse-disconnect-resume')?.status, 'SUCCESS');
    // DNS rebinding: forged Host rejected (4xx), localhost Host accepted (2xx).
    const dns = results.get('dns-rebinding-protection')!;
    assert.deepEqual(
      dns.checks.map((c) => [c.id, c.status]),
      [
        ['localhost-host-rebinding-rejected', 'SUCCESS'],
        ['localhost-host-valid-accepted', 'SUCCESS'],
      ],
    );
  });
});

describe('token proxy', () => {
  test('adds the bearer token: a token-protected fixture passes conformance only through the proxy', {
    timeout: 120_000,
  }, async () => {
    const TOKEN = 'conformance-secret-token';
    const server = await fixture({ requireToken: TOKEN });

    const direct = await runConformance(server.url, { scenario: 'tools-call-with-progress', timeoutMs: 60_000 });
    assert.equal(direct.get('tools-call-with-progress')?.passed, false, 'fixture must reject requests without token');

    let tokenCalls = 0;
    const p = await proxy(server.url, async () => {
      tokenCalls++;
      return TOKEN;
    });
    for (const scenario of ['tools-call-with-progress', 'dns-rebinding-protection', 'server-sse-polling']) {
      const results = await runConformance(p.url, { scenario, timeoutMs: 60_000 });
      const result = results.get(scenario);
      assert.ok(result?.passed, `${scenario} through the proxy: ${JSON.stringify(result?.checks)}`);
      if (scenario === 'server-sse-polling') {
        // Last-Event-ID travelled through the proxy and the result arrived on the GET stream.
        assert.equal(result.checks.find((c) => c.id === 'server-sse-disconnect-resume')?.status, 'SUCCESS');
      }
    }
    assert.ok(tokenCalls > 0, 'token function was used');
  });

  test('streams SSE event by event (progress arrives long before the result)', { timeout: 60_000 }, async () => {
    const TOKEN = 'stream-token';
    const server = await fixture({ requireToken: TOKEN });
    const p = await proxy(server.url, TOKEN);
    const base = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };

    let t0 = performance.now();
    const init = await fetch(p.url, {
      method: 'POST',
      headers: base,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'proxy-test', version: '1' } },
      }),
    });
    assert.equal(init.status, 200);
    const sessionId = init.headers.get('mcp-session-id');
    assert.ok(sessionId, 'mcp-session-id header forwarded');
    const initEvents = await readSse(init, t0, (e) => jsonOf(e)?.id === 1);
    assert.ok(initEvents.some((e) => jsonOf(e)?.result), 'initialize result received');

    const headers = { ...base, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
    const initialized = await fetch(p.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    assert.equal(initialized.status, 202);
    await initialized.body?.cancel();

    const DELAY = 400;
    t0 = performance.now();
    const call = await fetch(p.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'test_tool_with_progress', arguments: { delayMs: DELAY }, _meta: { progressToken: 'p-1' } },
      }),
    });
    assert.equal(call.status, 200);
    assert.match(call.headers.get('content-type') ?? '', /text\/event-stream/);
    const events = await readSse(call, t0, (e) => jsonOf(e)?.id === 2);

    // Priming event (SEP-1699) comes first: id + retry + empty data.
    assert.ok(events[0]?.id && events[0].data === '' && events[0].retry !== undefined, JSON.stringify(events[0]));
    const progress = events.filter((e) => jsonOf(e)?.method === 'notifications/progress');
    const result = events.find((e) => jsonOf(e)?.id === 2);
    assert.equal(progress.length, 3);
    assert.ok(result, 'tool result received');
    // With buffering, everything would arrive at once at the end.
    assert.ok(
      result.at - progress[0]!.at >= DELAY * 1.5,
      `first progress at ${progress[0]!.at.toFixed(0)} ms, result at ${result.at.toFixed(0)} ms`,
    );
    assert.ok(progress[1]!.at - progress[0]!.at >= DELAY * 0.75, 'second progress event arrived separately');

    const del = await fetch(p.url, { method: 'DELETE', headers: { 'mcp-session-id': sessionId } });
    assert.equal(del.status, 200);
    await del.body?.cancel();
  });

  test('SDK client call to test_reconnection resumes through the proxy (Last-Event-ID, retry)', {
    timeout: 60_000,
  }, async () => {
    const TOKEN = 'resume-token';
    const server = await fixture({ requireToken: TOKEN, retryIntervalMs: 200 });
    const p = await proxy(server.url, TOKEN);
    const client = new Client({ name: 'proxy-resume-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(p.url)));
    try {
      const result = await client.callTool({ name: 'test_reconnection', arguments: {} }, undefined, {
        timeout: 20_000,
      });
      const content = result.content as Array<{ type: string; text?: string }>;
      assert.match(content[0]?.text ?? '', /Reconnection test completed successfully/);
    } finally {
      await client.close();
    }
  });

  test('header, path, status and disconnect handling (against a recording upstream)', { timeout: 30_000 }, async () => {
    const seen: Array<{ method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string }> = [];
    let upstreamClosed: (() => void) | undefined;
    const upstreamClosedP = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const upstream = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        if (req.method === 'GET') {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'sess-1' });
          res.write('id: 1\ndata: first\n\n');
          const timer = setInterval(() => res.write(': keep-alive\n\n'), 50);
          res.on('close', () => {
            clearInterval(timer);
            upstreamClosed?.();
          });
          return;
        }
        res.writeHead(418, { 'content-type': 'application/json', 'x-custom': 'kept', 'mcp-session-id': 'sess-1' });
        res.end(JSON.stringify({ echoed: body }));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          upstream.closeAllConnections();
          upstream.close(() => resolve());
        }),
    );
    const upstreamPort = (upstream.address() as AddressInfo).port;
    const target = `http://127.0.0.1:${upstreamPort}/tenant/mcp?x=1`;
    const p = await proxy(target, 'tok-123');
    const proxyUrl = new URL(p.url);
    assert.equal(proxyUrl.pathname, '/tenant/mcp');
    assert.equal(proxyUrl.search, '?x=1');

    // POST: body, status, response headers; client Authorization is replaced; own Host mapped.
    const post = await fetch(p.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer client-supplied',
        origin: 'http://evil.example.com',
      },
      body: '{"hello":"world"}',
    });
    assert.equal(post.status, 418);
    assert.equal(post.headers.get('x-custom'), 'kept');
    assert.equal(post.headers.get('mcp-session-id'), 'sess-1');
    assert.deepEqual(await post.json(), { echoed: '{"hello":"world"}' });
    const first = seen.at(-1)!;
    assert.equal(first.method, 'POST');
    assert.equal(first.url, '/tenant/mcp?x=1');
    assert.equal(first.headers.authorization, 'Bearer tok-123');
    assert.equal(first.headers.host, `127.0.0.1:${upstreamPort}`, 'Host naming the proxy is mapped to the target');
    assert.equal(first.headers.origin, 'http://evil.example.com', 'Origin forwarded unchanged');

    // A forged Host is forwarded as-is (DNS-rebinding tests must reach the target's check).
    await new Promise<void>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: proxyUrl.port, path: '/tenant/mcp?x=1', method: 'POST', headers: { host: 'evil.example.com' } },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end('{}');
    });
    assert.equal(seen.at(-1)!.headers.host, 'evil.example.com');

    // GET SSE: last-event-id forwarded, first event arrives while the stream stays open,
    // and aborting the client closes the upstream request.
    const abort = new AbortController();
    const t0 = performance.now();
    const get = await fetch(p.url, {
      headers: { accept: 'text/event-stream', 'last-event-id': '41', 'mcp-session-id': 'sess-1' },
      signal: abort.signal,
    });
    assert.equal(get.status, 200);
    const events = await readSse(get, t0, (e) => e.data === 'first');
    assert.equal(events.at(-1)?.data, 'first');
    const getSeen = seen.at(-1)!;
    assert.equal(getSeen.headers['last-event-id'], '41');
    assert.equal(getSeen.headers['mcp-session-id'], 'sess-1');
    abort.abort();
    await Promise.race([
      upstreamClosedP,
      new Promise((_, reject) => setTimeout(() => reject(new Error('upstream request not closed')), 5_000)),
    ]);
  });
});
