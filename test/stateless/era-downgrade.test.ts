/**
 * A backend downgraded behind the gateway's back (issue 15, "Talking to 2026-07-28 backends":
 * the era is cached, and re-probed when the cached assumption fails): a 2026-only server on a
 * port, found to be of 2026-07-28 by the first call, is replaced by a 2025-11-25 one on the same
 * port. The next stateless call meets the old server's refusal, the gateway forgets the era,
 * probes again and serves the call through its bridge — the client notices nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startEraBackend } from '../fixtures/era-backends.js';
import { startGateway } from '../helpers/gateway.js';
import { startOAuthServer } from '../helpers/oauth.js';
import { statelessHeaders } from '../helpers/stateless-headers.js';

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };

test('a 2026 backend replaced by a 2025 one: the next call is bridged, the era probed again', async () => {
  const oauth = await startOAuthServer();
  let backend = await startEraBackend('modern');
  const port = Number(new URL(backend.url).port);
  const gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'era', url: backend.url }] });
  try {
    const token = await oauth.token({ sub: 'downgraded', aud: gateway.audience });
    const callEra = async (id: number) => {
      const res = await fetch(gateway.endpoint('era'), {
        method: 'POST',
        headers: statelessHeaders(token, 'tools/call', 'era'),
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'era', arguments: {}, _meta: META } }),
      });
      const text = await res.text();
      const body = res.headers.get('content-type')?.startsWith('text/event-stream') ? JSON.parse(text.split('\n').filter((l) => l.startsWith('data: ')).at(-1)!.slice(6)) : JSON.parse(text);
      return { status: res.status, text: (body.result?.content?.[0]?.text as string | undefined) ?? JSON.stringify(body) };
    };
    assert.deepEqual(await callEra(1), { status: 200, text: 'served as modern' });
    await backend.close();
    backend = await startEraBackend('legacy', { port });
    assert.deepEqual(await callEra(2), { status: 200, text: 'served as legacy' });
    assert.equal(backend.discoverCount(), 1, 'the era was probed again, once');
  } finally {
    await gateway.close();
    await Promise.allSettled([backend.close(), oauth.stop()]);
  }
});
