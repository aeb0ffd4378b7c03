/**
 * The broker's outbound fetches stay behind the SSRF guard (issue 28 §3). oidc-provider
 * fetches URLs from client metadata with its own HTTP client: `sector_identifier_uri` when a
 * client is registered or loaded, `jwks_uri` when a `private_key_jwt` client authenticates.
 * Registration is anonymous and a Client ID Metadata Document is anyone's, so either would
 * let a stranger make the gateway call an internal service, and the answer's status came back
 * in `error_description` (a port and endpoint oracle).
 *
 * The internal service is a loopback HTTPS listener that counts every TCP connection and
 * every request (a connection alone answers "is this port open"). TLS verification is off
 * in this process, as the worst case: a listener with a valid certificate would answer.
 *
 * An IP literal is refused by the URL check alone; a host name is refused in the lookup the
 * connection itself uses (outbound-guard.ts `publicOnlyLookup`). To reach that branch the test
 * gives the process one more name, `INTERNAL_NAME`, that resolves to 127.0.0.1 (as a name an
 * attacker controls would): `dns.lookup` is wrapped for that name alone and the ES module
 * bindings synced, so the guard's own `import { lookup } from 'node:dns'` sees it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import dns from 'node:dns';
import { mkdtemp, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { syncBuiltinESMExports } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { SignJWT } from 'jose';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { ecPem, startMetadataDocumentServer } from './support.js';

const run = promisify(execFile);

/** An internal HTTPS service: answers 403 to everything and counts connections and requests. */
interface InternalService {
  url: string;
  /** New connections plus requests (a kept-alive connection may carry a later request). */
  contacts(): number;
  close(): Promise<void>;
}

async function startInternalService(): Promise<InternalService> {
  const dir = await mkdtemp(join(tmpdir(), 'sb-internal-'));
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'key.pem', '-out', 'cert.pem', '-days', '1', '-subj', '/CN=127.0.0.1'], { cwd: dir, timeout: 30_000 });
  const server: Server = createServer({ key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) }, (_req, res) => {
    res.writeHead(403, { 'content-type': 'text/plain' }).end('internal only');
  });
  let contacts = 0;
  server.on('connection', () => contacts++);
  server.on('request', () => contacts++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    contacts: () => contacts,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A host name (not a loopback name by its spelling, so the URL check lets it pass) that resolves to loopback. */
const INTERNAL_NAME = 'internal.switchboard-test.example';

/** Makes `dns.lookup` answer 127.0.0.1 for `name` (every other name as before); returns the undo and how often `name` was looked up. */
function resolveToLoopback(name: string): { lookups(): number; restore(): void } {
  const original = dns.lookup;
  let lookups = 0;
  const wrapped = (hostname: string, options: unknown, callback?: unknown) => {
    if (hostname !== name) return (original as (...args: unknown[]) => void)(hostname, options, callback);
    lookups++;
    const done = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
    process.nextTick(() => (all ? done(null, [{ address: '127.0.0.1', family: 4 }]) : done(null, '127.0.0.1', 4)));
  };
  dns.lookup = wrapped as typeof dns.lookup;
  syncBuiltinESMExports();
  return {
    lookups: () => lookups,
    restore() {
      dns.lookup = original;
      syncBuiltinESMExports();
    },
  };
}

let oauth: OAuthHandle;
let everything: EverythingHandle;
let internal: InternalService;
let gateway: GatewayHandle;
let internalName: ReturnType<typeof resolveToLoopback>;
const tlsSetting = process.env.NODE_TLS_REJECT_UNAUTHORIZED;

before(async () => {
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  internalName = resolveToLoopback(INTERNAL_NAME);
  [oauth, everything, internal] = await Promise.all([startOAuthServer(), startEverything(), startInternalService()]);
  const port = await freePort();
  gateway = await startGateway({
    port,
    issuer: oauth.issuer,
    backends: [{ name: 'everything', url: everything.url }],
    overrides: {
      auth: { mode: 'broker', issuer: oauth.issuer, audience: `http://127.0.0.1:${port}/mcp`, login: { clientId: 'switchboard' }, broker: { signingKeys: [ecPem()] } },
      secrets: { cookieKey: 'c'.repeat(40), tokenKey: 't'.repeat(40) },
    },
  });
});

after(async () => {
  await gateway?.close();
  await Promise.allSettled([internal?.close(), everything?.stop(), oauth?.stop()]);
  internalName?.restore();
  if (tlsSetting === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  else process.env.NODE_TLS_REJECT_UNAUTHORIZED = tlsSetting;
});

async function registerClient(metadata: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gateway.url}/oauth2/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:9/callback'], ...metadata }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A `private_key_jwt` client authentication (RFC 7523) at the token endpoint, signed by a key nobody published. */
async function tokenWithAssertion(clientId: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const assertion = await new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(`${gateway.url}/oauth2/token`)
    .setJti(crypto.randomUUID())
    .setIssuedAt()
    .setExpirationTime('1m')
    .sign(privateKey);
  const form = { grant_type: 'authorization_code', code: 'not-a-code', redirect_uri: 'http://127.0.0.1:9/callback', code_verifier: 'v'.repeat(43), client_id: clientId, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion };
  const res = await fetch(`${gateway.url}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Nothing of the internal service's answer (403 Forbidden) reaches the caller. */
function assertNoOracle(body: Record<string, unknown>): void {
  const text = JSON.stringify(body);
  assert.doesNotMatch(text, /403|Forbidden|status code/i, `the answer tells nothing of the internal service: ${text}`);
}

describe('anonymous registration (RFC 7591)', () => {
  test('a sector_identifier_uri naming an internal service is refused without calling it, and nothing of it leaks', async () => {
    const before = internal.contacts();
    const res = await registerClient({ sector_identifier_uri: `${internal.url}/admin/secret` });
    assert.equal(internal.contacts() - before, 0, 'the gateway connected to the internal service');
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_client_metadata');
    assertNoOracle(res.body);
  });

  test('private_key_jwt (whose jwks_uri would be fetched) is refused; a jwks_uri or jwks is refused', async () => {
    for (const metadata of [
      { token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `${internal.url}/admin/jwks` },
      { token_endpoint_auth_method: 'none', jwks_uri: `${internal.url}/admin/jwks` },
      { token_endpoint_auth_method: 'self_signed_tls_client_auth' },
    ]) {
      const before = internal.contacts();
      const res = await registerClient(metadata);
      assert.equal(res.status, 400, JSON.stringify(metadata));
      assert.equal(res.body.error, 'invalid_client_metadata');
      // A refused registration stores no client, so no later request can fetch for it.
      assert.equal(internal.contacts() - before, 0);
    }
  });

  test('the ordinary methods still register: none, client_secret_basic, client_secret_post', async () => {
    for (const method of ['none', 'client_secret_basic', 'client_secret_post']) {
      const res = await registerClient({ token_endpoint_auth_method: method });
      assert.equal(res.status, 201, `${method}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.token_endpoint_auth_method, method);
    }
  });
});

/**
 * A private_key_jwt client whose Client ID Metadata Document names `jwksUri` authenticates: the
 * keys are never fetched, the client fails authentication, and nothing of the target leaks.
 */
async function assertJwksUriNeverFetched(jwksUri: string): Promise<void> {
  const doc = await startMetadataDocumentServer((clientId) => ({ client_id: clientId, redirect_uris: ['http://127.0.0.1:9/callback'], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: jwksUri }));
  try {
    const before = internal.contacts();
    const res = await tokenWithAssertion(doc.clientId);
    assert.equal(internal.contacts() - before, 0, 'the gateway connected to the internal service');
    assert.equal(res.status, 401);
    assert.equal(res.body.error, 'invalid_client');
    assertNoOracle(res.body);
  } finally {
    await doc.close();
  }
}

describe('Client ID Metadata Documents', () => {
  test('a document\'s jwks_uri naming an internal service is never fetched: the client fails authentication', async () => {
    await assertJwksUriNeverFetched(`${internal.url}/admin/jwks`);
  });

  test('a jwks_uri whose host name resolves to loopback is refused in the lookup, before any connection', async () => {
    const lookupsBefore = internalName.lookups();
    await assertJwksUriNeverFetched(`${internal.url.replace('127.0.0.1', INTERNAL_NAME)}/admin/jwks`);
    assert.ok(internalName.lookups() > lookupsBefore, 'the provider resolved the name (the URL check let it pass, so the lookup is what refused it)');
  });

  test('a jwks_uri on localhost is refused by its name, unresolved', async () => {
    await assertJwksUriNeverFetched(`${internal.url.replace('127.0.0.1', 'localhost')}/admin/jwks`);
  });

  test('a document with a sector_identifier_uri is refused without calling it', async () => {
    const doc = await startMetadataDocumentServer((clientId) => ({ client_id: clientId, redirect_uris: ['http://127.0.0.1:9/callback'], token_endpoint_auth_method: 'none', sector_identifier_uri: `${internal.url}/admin/secret` }));
    try {
      const before = internal.contacts();
      const res = await fetch(`${gateway.url}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'x', client_id: doc.clientId }) });
      const body = (await res.json()) as Record<string, unknown>;
      assert.equal(internal.contacts() - before, 0, 'the gateway connected to the internal service');
      assert.equal(body.error, 'invalid_client');
      assertNoOracle(body);
      assert.equal(doc.fetches(), 1, 'the document itself was fetched (through the guard)');
    } finally {
      await doc.close();
    }
  });
});
