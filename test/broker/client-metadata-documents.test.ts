/**
 * Client ID Metadata Documents (src/broker/client-metadata-documents.ts; SPEC §8): which URLs
 * may be client ids at all, and what a served document must say, against a real loopback
 * HTTP server and the memory store: `client_id` equal to its URL, no secret, a redirect URI;
 * fetched once and then read from the store (a refusal too, for a minute); never fetched
 * from loopback unless `publicUrl` itself is loopback.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createClientMetadataDocuments, isClientIdUrl } from '../../src/broker/client-metadata-documents.js';
import { MemoryStore } from '../../src/state/memory-store.js';

describe('which client ids name a document', () => {
  test('https with a path, in normal form, without credentials or fragment', () => {
    assert.equal(isClientIdUrl('https://client.example/oauth/metadata.json', false), true);
    for (const id of [
      'https://client.example/',
      'https://client.example',
      'https://user:pw@client.example/m.json',
      'https://client.example/m.json#x',
      'https://client.example/a/../m.json',
      'https://CLIENT.example/m.json',
      'http://client.example/m.json',
      'not a url',
      `https://client.example/${'a'.repeat(2100)}`,
    ]) {
      assert.equal(isClientIdUrl(id, false), false, id);
    }
  });

  test('http only for a loopback host, and only while publicUrl is loopback', () => {
    assert.equal(isClientIdUrl('http://127.0.0.1:8123/client.json', true), true);
    assert.equal(isClientIdUrl('http://localhost:8123/client.json', true), true);
    assert.equal(isClientIdUrl('http://127.0.0.1:8123/client.json', false), false);
    assert.equal(isClientIdUrl('http://client.example/client.json', true), false);
  });
});

describe('resolving a document', () => {
  let server: Server;
  let base: string;
  const served = new Map<string, (id: string) => unknown>();
  let fetches = 0;

  before(async () => {
    server = createServer((req, res) => {
      fetches++;
      const make = served.get(req.url ?? '');
      if (!make) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(make(`${base}${req.url}`)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const good = (id: string) => ({ client_id: id, client_name: 'Good', redirect_uris: ['http://127.0.0.1:9/cb'] });

  test('a good document becomes the client (token_endpoint_auth_method none), fetched once', async () => {
    served.set('/good.json', good);
    const refused: string[] = [];
    const documents = createClientMetadataDocuments(new MemoryStore(), { allowLoopback: true, onRefused: (_id, reason) => refused.push(reason) });
    const before = fetches;
    const client = await documents.resolve(`${base}/good.json`);
    assert.equal(client?.client_id, `${base}/good.json`);
    assert.equal(client?.token_endpoint_auth_method, 'none');
    assert.equal((await documents.resolve(`${base}/good.json`))?.client_name, 'Good');
    assert.equal(fetches - before, 1);
    assert.deepEqual(refused, []);
  });

  test('refused: another client_id, a secret, a shared-secret method, no redirect URI, not JSON, not found', async () => {
    served.set('/other-id.json', () => good('https://someone.else/m.json'));
    served.set('/secret.json', (id) => ({ ...good(id), client_secret: 's3cret' }));
    served.set('/basic.json', (id) => ({ ...good(id), token_endpoint_auth_method: 'client_secret_basic' }));
    served.set('/no-redirect.json', (id) => ({ client_id: id }));
    served.set('/array.json', () => [1, 2]);
    const refused: string[] = [];
    const documents = createClientMetadataDocuments(new MemoryStore(), { allowLoopback: true, onRefused: (_id, reason) => refused.push(reason) });
    for (const path of ['/other-id.json', '/secret.json', '/basic.json', '/no-redirect.json', '/array.json', '/missing.json']) {
      assert.equal(await documents.resolve(`${base}${path}`), undefined, path);
    }
    assert.equal(refused.length, 6);
    assert.ok(!refused.some((r) => r.includes('s3cret')), 'a refusal never quotes the document');
  });

  test('a refusal is remembered: asking again does not fetch again', async () => {
    const documents = createClientMetadataDocuments(new MemoryStore(), { allowLoopback: true });
    const before = fetches;
    await documents.resolve(`${base}/missing.json`);
    await documents.resolve(`${base}/missing.json`);
    assert.equal(fetches - before, 1);
  });

  test('with a public publicUrl, a loopback document is never fetched', async () => {
    served.set('/good.json', good);
    const documents = createClientMetadataDocuments(new MemoryStore(), { allowLoopback: false });
    const before = fetches;
    assert.equal(await documents.resolve(`${base}/good.json`), undefined);
    assert.equal(await documents.resolve(`https://127.0.0.1:${new URL(base).port}/good.json`), undefined);
    assert.equal(fetches - before, 0);
  });
});
