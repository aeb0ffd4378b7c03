/**
 * `headersOf` (src/wire/headers.ts) reads a Fastify request's headers from Node's message instead
 * of Fastify's `request.headers` getter: it must be the very object the getter gives, at every
 * stage of a request the gateway reads them in (a hook, after fields were added, the handler),
 * a repeated header as Node joins it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { headersOf, headerValue } from '../../src/wire/headers.js';

test('headersOf is the object Fastify’s request.headers gives, in a hook and in the handler', async () => {
  const app = Fastify();
  const seen: Array<{ stage: string; same: boolean; origin: string | undefined; custom: string | undefined }> = [];
  const look = (stage: string, request: Parameters<typeof headersOf>[0] & { headers: unknown }) => {
    const headers = headersOf(request);
    seen.push({ stage, same: headers === request.headers, origin: headers.origin, custom: headerValue(headers['x-custom']) });
  };
  app.addHook('onRequest', (request, _reply, done) => {
    look('onRequest', request);
    // A field added on the way, as the gateway's hooks add `principal`.
    (request as unknown as { principal: unknown }).principal = { userKey: 'k' };
    done();
  });
  app.post('/mcp', async (request) => {
    look('handler', request);
    return 'ok';
  });
  try {
    const res = await app.inject({ method: 'POST', url: '/mcp', headers: { origin: 'https://app.example', 'x-custom': ['first', 'second'], 'content-type': 'text/plain' }, payload: 'x' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(seen, [
      { stage: 'onRequest', same: true, origin: 'https://app.example', custom: 'first, second' },
      { stage: 'handler', same: true, origin: 'https://app.example', custom: 'first, second' },
    ]);
  } finally {
    await app.close();
  }
});
