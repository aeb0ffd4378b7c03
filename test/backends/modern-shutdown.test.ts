/**
 * Shutting down with a 2025-11-25 client's GET stream open on a 2026-07-28-only backend
 * (src/backends/modern/session-listens.ts): the stream is the backend's `subscriptions/listen`,
 * a response that never ends by itself, so the gateway must close it when it ends the client's
 * stream — else closing the backend's connection pool waits for it for ever (SPEC §5: a
 * gateway stops within its drain timeout).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startConformanceServer } from '../helpers/conformance.js';
import { startGateway } from '../helpers/gateway.js';
import { startOAuthServer } from '../helpers/oauth.js';

test('the gateway stops within its drain timeout while a session client listens on a 2026-only backend', async () => {
  const [oauth, backend] = await Promise.all([startOAuthServer(), startConformanceServer({ eras: '2026' })]);
  try {
    const gateway = await startGateway({ issuer: oauth.issuer, backends: [{ name: 'modern', url: backend.url }], overrides: { shutdown: { drainTimeout: '2s' } } });
    const token = await oauth.token({ sub: 'listener', aud: gateway.audience });
    const client = new Client({ name: 'listener', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('modern'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    // The SDK opens the GET stream after initialize; a call makes sure the session is in use.
    await client.listTools();
    const open = await fetch(`${gateway.url}/metrics`).then((r) => r.text());
    assert.match(open, /^switchboard_sse_streams_open [1-9]/m, 'the GET stream is open');
    let timer: NodeJS.Timeout | undefined;
    const closed = await Promise.race([
      gateway.close().then(() => 'closed'),
      new Promise((resolve) => (timer = setTimeout(resolve, 15_000, 'still closing after 15 s'))),
    ]);
    clearTimeout(timer);
    assert.equal(closed, 'closed');
    await client.close().catch(() => {});
  } finally {
    await Promise.allSettled([backend.stop(), oauth.stop()]);
  }
});
