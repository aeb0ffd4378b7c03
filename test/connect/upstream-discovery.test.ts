/**
 * `upstreamAuth.discover` (MCP 2025-11-25 Authorization; RFC 9728, RFC 8414, RFC 7591)
 * and the SSRF guard in front of it, with node:http fixtures on 127.0.0.1 (loopback
 * allowed explicitly; everything else is refused before any connection).
 */
import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { after, before, beforeEach, describe, test } from 'node:test';
import { classifyAddress, safeFetch, SafeFetchError } from '../../src/providers/safe-fetch.js';
import { createTokenCipher } from '../../src/state/secrets.js';
import { registerClient, registeredClient } from '../../src/providers/client-registration.js';
import { DiscoveryError } from '../../src/providers/discovery-fetch.js';
import { discoverUpstreamAuth } from '../../src/providers/upstream-discovery.js';
import { requestedScopes, withOfflineAccess } from '../../src/providers/provider-endpoints.js';
import { parseWwwAuthenticate } from '../../src/providers/www-authenticate.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { hold, sendJson, startHttpFixture, type HttpFixture, type RecordedRequest } from '../fixtures/provider-http-fixture.js';

type Route = (req: RecordedRequest) => { status: number; body?: unknown; headers?: Record<string, string> } | 'hang' | undefined;

/** One fixture server whose routes tests replace. */
let routes: Record<string, Route> = {};
let fx: HttpFixture;
const origin = () => fx.origin;

before(async () => {
  fx = await startHttpFixture((req, res) => {
    const route = routes[req.path];
    const answer = route?.(req);
    if (answer === 'hang') return hold(res);
    if (!answer) return;
    if (answer.body === undefined) {
      res.writeHead(answer.status, answer.headers).end();
      return;
    }
    sendJson(res, answer.status, answer.body, answer.headers);
  });
});
after(async () => {
  await fx?.close();
});
beforeEach(() => {
  routes = {};
  fx.requests.length = 0;
});

/** RFC 8414 metadata for an issuer served by the fixture. */
function asMetadata(issuer: string, over: Record<string, unknown> = {}) {
  return {
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    revocation_endpoint: `${issuer}/revoke`,
    registration_endpoint: `${issuer}/register`,
    code_challenge_methods_supported: ['S256'],
    scopes_supported: ['as-scope'],
    ...over,
  };
}

function noResolve() {
  const calls: string[] = [];
  return {
    calls,
    resolve: async (host: string): Promise<LookupAddress[]> => {
      calls.push(host);
      throw new Error('no DNS in this test');
    },
  };
}

async function refused(p: Promise<unknown>, reason: SafeFetchError['reason']): Promise<SafeFetchError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof SafeFetchError, `expected SafeFetchError, got ${String(err)}`);
    assert.equal(err.reason, reason, err.message);
    return err;
  }
  assert.fail('expected a refusal');
}

describe('WWW-Authenticate parsing (RFC 9110 §11.6.1, RFC 9728 §5.1)', () => {
  test('several challenges, quoted strings with escapes, token68', () => {
    const c = parseWwwAuthenticate(
      'Basic realm="a, b", Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", scope="files:read  files:write", error=invalid_token, Negotiate abc123==, DPoP algs="ES256 \\"x\\""',
    );
    assert.deepEqual(
      c.map((x) => x.scheme),
      ['basic', 'bearer', 'negotiate', 'dpop'],
    );
    assert.equal(c[0]!.params.realm, 'a, b');
    assert.equal(c[1]!.params.resource_metadata, 'https://mcp.example/.well-known/oauth-protected-resource/mcp');
    assert.equal(c[1]!.params.scope, 'files:read  files:write');
    assert.equal(c[1]!.params.error, 'invalid_token');
    assert.equal(c[2]!.token68, 'abc123==');
    assert.equal(c[3]!.params.algs, 'ES256 "x"');
    assert.deepEqual(parseWwwAuthenticate('Bearer'), [{ scheme: 'bearer', params: {} }]);
    assert.deepEqual(parseWwwAuthenticate(''), []);
    assert.equal(parseWwwAuthenticate('Bearer RESOURCE_METADATA = "x"')[0]!.params.resource_metadata, 'x');
  });
});

describe('discovery', () => {
  test('PRM from the 401 header → AS metadata (path-inserted RFC 8414)', async () => {
    const backend = `${origin()}/mcp`;
    routes['/meta/prm'] = () => ({ status: 200, body: { resource: backend, authorization_servers: [`${origin()}/as`], scopes_supported: ['mcp:tools'] } });
    routes['/.well-known/oauth-authorization-server/as'] = () => ({ status: 200, body: asMetadata(`${origin()}/as`) });
    const found = await discoverUpstreamAuth(backend, `Bearer error="invalid_token", resource_metadata="${origin()}/meta/prm", scope="mcp:tools mcp:read"`, { allowLoopback: true });
    assert.deepEqual(found, {
      resource: backend,
      authorizationServer: `${origin()}/as`,
      authorizationUrl: `${origin()}/as/authorize`,
      tokenUrl: `${origin()}/as/token`,
      revocationUrl: `${origin()}/as/revoke`,
      registrationUrl: `${origin()}/as/register`,
      scopesSupported: ['mcp:tools'],
      challengeScopes: ['mcp:tools', 'mcp:read'],
      foundBy: 'prm',
    });
    assert.deepEqual(
      fx.requests.map((r) => r.path),
      ['/meta/prm', '/.well-known/oauth-authorization-server/as'],
    );
  });

  test('without a header: well-known PRM (path-inserted, then root), then OIDC discovery fallbacks', async () => {
    const backend = `${origin()}/mcp`;
    // Path-inserted PRM is missing (404 by default); the root one names the origin as resource.
    routes['/.well-known/oauth-protected-resource'] = () => ({ status: 200, body: { resource: origin(), authorization_servers: [`${origin()}/tenant`] } });
    routes['/tenant/.well-known/openid-configuration'] = () => ({ status: 200, body: asMetadata(`${origin()}/tenant`, { revocation_endpoint: undefined, registration_endpoint: undefined }) });
    const found = await discoverUpstreamAuth(backend, undefined, { allowLoopback: true });
    assert.equal(found.resource, origin());
    assert.equal(found.authorizationServer, `${origin()}/tenant`);
    assert.equal(found.tokenUrl, `${origin()}/tenant/token`);
    assert.equal(found.revocationUrl, undefined);
    assert.equal(found.registrationUrl, undefined);
    // MCP 2025-11-25 scope selection: the PRM's scopes_supported only, never the AS's.
    assert.equal(found.scopesSupported, undefined);
    assert.deepEqual(
      fx.requests.map((r) => r.path),
      [
        '/.well-known/oauth-protected-resource/mcp',
        '/.well-known/oauth-protected-resource',
        '/.well-known/oauth-authorization-server/tenant',
        '/.well-known/openid-configuration/tenant',
        '/tenant/.well-known/openid-configuration',
      ],
    );
  });

  test('offline_access (SEP-2207): reported where the AS metadata lists it, added to the scopes asked for then, and only then', async () => {
    const backend = `${origin()}/mcp`;
    routes['/meta/prm'] = () => ({ status: 200, body: { resource: backend, authorization_servers: [`${origin()}/as`], scopes_supported: ['mcp:tools'] } });
    routes['/.well-known/oauth-authorization-server/as'] = () => ({ status: 200, body: asMetadata(`${origin()}/as`, { scopes_supported: ['mcp:tools', 'offline_access'] }) });
    const found = await discoverUpstreamAuth(backend, `Bearer resource_metadata="${origin()}/meta/prm"`, { allowLoopback: true });
    assert.equal(found.offlineAccess, true);
    assert.deepEqual(withOfflineAccess(requestedScopes(found), found), ['mcp:tools', 'offline_access']);
    assert.deepEqual(withOfflineAccess(['offline_access', 'mcp:tools'], found), ['offline_access', 'mcp:tools'], 'not twice');
    assert.deepEqual(withOfflineAccess([], found), [], 'not alone: it would replace the default scope');
    routes['/.well-known/oauth-authorization-server/as'] = () => ({ status: 200, body: asMetadata(`${origin()}/as`) });
    const without = await discoverUpstreamAuth(backend, `Bearer resource_metadata="${origin()}/meta/prm"`, { allowLoopback: true });
    assert.equal(without.offlineAccess, undefined);
    assert.deepEqual(withOfflineAccess(requestedScopes(without), without), ['mcp:tools']);
  });

  test('RFC 9207: authorization_response_iss_parameter_supported is reported when true, and only then', async () => {
    routes['/.well-known/oauth-protected-resource/mcp'] = () => ({ status: 200, body: { resource: `${origin()}/mcp`, authorization_servers: [origin()] } });
    for (const [advertised, expected] of [[true, true], [false, undefined], ['true', undefined], [undefined, undefined]] as const) {
      routes['/.well-known/oauth-authorization-server'] = () => ({ status: 200, body: asMetadata(origin(), { authorization_response_iss_parameter_supported: advertised }) });
      const found = await discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true });
      assert.equal(found.issParameterSupported, expected, `advertised ${JSON.stringify(advertised)}`);
      assert.equal(found.authorizationServer, origin(), 'the issuer the callback compares iss with');
    }
  });

  test('AS metadata whose issuer differs is refused', async () => {
    routes['/.well-known/oauth-protected-resource/mcp'] = () => ({ status: 200, body: { resource: `${origin()}/mcp`, authorization_servers: [origin()] } });
    routes['/.well-known/oauth-authorization-server'] = () => ({ status: 200, body: asMetadata('https://evil.example') });
    await assert.rejects(discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true }), (err: unknown) => err instanceof DiscoveryError && /issuer/.test(err.message));
  });

  test('no S256 is refused; absent PKCE metadata is refused unless allowed', async () => {
    routes['/.well-known/oauth-protected-resource/mcp'] = () => ({ status: 200, body: { resource: `${origin()}/mcp`, authorization_servers: [origin()] } });
    routes['/.well-known/oauth-authorization-server'] = () => ({ status: 200, body: asMetadata(origin(), { code_challenge_methods_supported: ['plain'] }) });
    await assert.rejects(discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true }), (err: unknown) => err instanceof DiscoveryError && /S256/.test(err.message));
    routes['/.well-known/oauth-authorization-server'] = () => ({ status: 200, body: asMetadata(origin(), { code_challenge_methods_supported: undefined }) });
    await assert.rejects(discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true }), (err: unknown) => err instanceof DiscoveryError && /PKCE/.test(err.message));
    const found = await discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true, allowMissingPkceMetadata: true });
    assert.equal(found.authorizationServer, origin());
  });

  test('a PRM for another resource is refused; none at all is a 2025-03-26 server (default endpoints on its origin)', async () => {
    routes['/.well-known/oauth-protected-resource/mcp'] = () => ({ status: 200, body: { resource: 'https://other.example/mcp', authorization_servers: [origin()] } });
    await assert.rejects(discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true }), /does not match/);
    routes['/.well-known/oauth-protected-resource/mcp'] = () => ({ status: 200, body: { resource: `${origin()}/mcp-other`, authorization_servers: [origin()] } });
    await assert.rejects(discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true }), /does not match/);
    routes = {};
    const legacy = await discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true });
    assert.equal(legacy.foundBy, 'default-endpoints');
    assert.equal(legacy.authorizationUrl, `${origin()}/authorize`);
  });

  test('discovered endpoints must pass the same URL rules (no private or plain-http endpoints)', async () => {
    routes['/.well-known/oauth-protected-resource/mcp'] = () => ({ status: 200, body: { resource: `${origin()}/mcp`, authorization_servers: [origin()] } });
    routes['/.well-known/oauth-authorization-server'] = () => ({ status: 200, body: asMetadata(origin(), { token_endpoint: 'https://169.254.169.254/token' }) });
    await assert.rejects(discoverUpstreamAuth(`${origin()}/mcp`, undefined, { allowLoopback: true }), /token_endpoint/);
  });

  test('without allowLoopback, a loopback backend or metadata URL is refused before any request', async () => {
    await assert.rejects(discoverUpstreamAuth(`${origin()}/mcp`), DiscoveryError);
    await assert.rejects(discoverUpstreamAuth('https://mcp.example/mcp', `Bearer resource_metadata="${origin()}/meta/prm"`, { resolve: async () => [{ address: '93.184.216.34', family: 4 }] }), DiscoveryError);
    assert.equal(fx.requests.length, 0);
  });
});

describe('safe fetch', () => {
  test('a non-https, non-loopback URL is refused without any network access', async () => {
    const dns = noResolve();
    await refused(safeFetch('http://example.com/', { resolve: dns.resolve }), 'url');
    await refused(safeFetch('http://example.com/', { resolve: dns.resolve, allowLoopback: true }), 'url');
    await refused(safeFetch('ftp://example.com/x', { resolve: dns.resolve }), 'url');
    await refused(safeFetch('https://user:pw@example.com/', { resolve: dns.resolve }), 'url');
    assert.deepEqual(dns.calls, []);
  });

  test('IP literals in private, link-local, unique-local ranges are refused before connecting', async () => {
    const dns = noResolve();
    for (const url of ['https://10.0.0.1/', 'https://169.254.169.254/latest/meta-data', 'https://[fd00::1]/', 'https://[::ffff:10.0.0.1]/', 'https://0.0.0.0/', 'https://[::]/', 'https://224.0.0.1/', 'https://192.168.1.1:8443/']) {
      const started = Date.now();
      await refused(safeFetch(url, { resolve: dns.resolve, timeoutMs: 60_000 }), 'address');
      assert.ok(Date.now() - started < 1_000, `${url} refused at once`);
    }
    assert.deepEqual(dns.calls, []);
  });

  test('loopback only when allowed; a name that resolves to a private address is refused', async () => {
    await refused(safeFetch(`${origin()}/x`), 'url');
    await refused(safeFetch(`https://127.0.0.1:${fx.port}/x`), 'address');
    await refused(safeFetch('https://localhost/x'), 'address');
    await refused(safeFetch('https://internal.example/', { resolve: async () => [{ address: '93.184.216.34', family: 4 }, { address: '10.1.2.3', family: 4 }] }), 'address');
    await refused(safeFetch('https://rebind.example/', { resolve: async () => [{ address: '::1', family: 6 }] }), 'address');
    await refused(safeFetch('https://nx.example/', { resolve: async () => [] }), 'dns');
    await refused(safeFetch('http://public.localhost/', { allowLoopback: true, resolve: async () => [{ address: '93.184.216.34', family: 4 }] }), 'url');
    assert.equal(fx.requests.length, 0);
    routes['/ok'] = () => ({ status: 200, body: { fine: true } });
    const res = await safeFetch(`${origin()}/ok`, { allowLoopback: true });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { fine: true });
  });

  test('a host name connects to the addresses that were checked (pinned), not to a second resolution', async () => {
    routes['/ok'] = () => ({ status: 200, body: { pinned: true } });
    const looked: string[] = [];
    // Where the system resolver does not know this name (as on the CI image), the connection
    // can only succeed through the pinned lookup.
    const res = await safeFetch(`http://switchboard-pinned-test.localhost:${fx.port}/ok`, {
      allowLoopback: true,
      resolve: async (host) => {
        looked.push(host);
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    assert.deepEqual(await res.json(), { pinned: true });
    assert.deepEqual(looked, ['switchboard-pinned-test.localhost']);
    assert.equal(fx.hits('/ok').at(-1)!.headers.host, `switchboard-pinned-test.localhost:${fx.port}`);
  });

  test('a redirect is an error, even to loopback; a slow answer times out; a large body is refused', async () => {
    routes['/redirect'] = () => ({ status: 302, headers: { location: `${origin()}/ok` } });
    routes['/ok'] = () => ({ status: 200, body: {} });
    const err = await refused(safeFetch(`${origin()}/redirect`, { allowLoopback: true }), 'redirect');
    assert.equal(err.status, 302);
    assert.equal(fx.hits('/ok').length, 0, 'not followed');
    routes['/hang'] = () => 'hang';
    await refused(safeFetch(`${origin()}/hang`, { allowLoopback: true, timeoutMs: 200 }), 'timeout');
    routes['/big'] = () => ({ status: 200, body: { pad: 'x'.repeat(10_000) } });
    await refused(safeFetch(`${origin()}/big`, { allowLoopback: true, maxBodyBytes: 1_000 }), 'too_large');
  });

  test('address classes', () => {
    const cases: Record<string, string> = {
      '8.8.8.8': 'public',
      '127.0.0.1': 'loopback',
      '127.255.0.9': 'loopback',
      '10.0.0.1': 'private',
      '172.16.0.1': 'private',
      '172.32.0.1': 'public',
      '192.168.0.1': 'private',
      '100.64.0.1': 'private',
      '169.254.169.254': 'link-local',
      '0.0.0.0': 'unspecified',
      '224.0.0.1': 'multicast',
      '255.255.255.255': 'reserved',
      '::1': 'loopback',
      '::': 'unspecified',
      'fd00::1': 'unique-local',
      'fc12::1': 'unique-local',
      'fe80::1%eth0': 'link-local',
      'ff02::1': 'multicast',
      '::ffff:10.0.0.1': 'private',
      '::ffff:a00:1': 'private',
      '::ffff:8.8.8.8': 'public',
      '64:ff9b::a9fe:a9fe': 'link-local',
      '2002:0a00:0001::1': 'private',
      '2001:db8::1': 'reserved',
      '2606:4700:4700::1111': 'public',
    };
    for (const [address, expected] of Object.entries(cases)) assert.equal(classifyAddress(address), expected, address);
  });
});

describe('dynamic client registration (RFC 7591)', () => {
  test('registerClient posts client metadata and reads the client id', async () => {
    routes['/register'] = () => ({ status: 201, body: { client_id: 'dyn-client-1', client_id_issued_at: 1 } });
    const client = await registerClient(`${origin()}/register`, { redirectUri: 'https://sb.example/oauth/callback', clientName: 'Switchboard test' }, { allowLoopback: true });
    assert.deepEqual(client, { clientId: 'dyn-client-1' });
    const sent = JSON.parse(fx.hits('/register')[0]!.body) as Record<string, unknown>;
    assert.deepEqual(sent, {
      client_name: 'Switchboard test',
      redirect_uris: ['https://sb.example/oauth/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'web',
    });
    routes['/register'] = () => ({ status: 400, body: { error: 'invalid_redirect_uri', error_description: 'nope' } });
    await assert.rejects(registerClient(`${origin()}/register`, { redirectUri: 'x', clientName: 'y' }, { allowLoopback: true }), /invalid_redirect_uri/);
  });

  test('application_type (SEP-837): web for an https gateway, native for one on a loopback address or a custom scheme', async () => {
    routes['/register'] = () => ({ status: 201, body: { client_id: 'dyn-client-2' } });
    const sent = async (redirectUri: string) => {
      await registerClient(`${origin()}/register`, { redirectUri, clientName: 'Switchboard' }, { allowLoopback: true });
      return (JSON.parse(fx.hits('/register').at(-1)!.body) as Record<string, unknown>).application_type;
    };
    assert.equal(await sent('https://sb.example/oauth/callback/acme'), 'web');
    assert.equal(await sent('http://sb.internal:8080/oauth/callback/acme'), 'web');
    assert.equal(await sent('http://127.0.0.1:8080/oauth/callback/acme'), 'native');
    assert.equal(await sent('http://localhost:8080/oauth/callback/acme'), 'native');
    assert.equal(await sent('http://[::1]:8080/oauth/callback/acme'), 'native');
    assert.equal(await sent('com.example.app:/oauth/callback'), 'native');
  });

  test('registeredClient caches per provider in the store and reuses it; a new redirect URI (the per-provider one) registers again', async () => {
    let n = 0;
    routes['/register'] = () => ({ status: 201, body: { client_id: `dyn-${++n}` } });
    const store = new MemoryStore();
    try {
      const url = `${origin()}/register`;
      const first = await registeredClient(store, 'mcp-upstream', url, 'https://sb.example/oauth/callback', { allowLoopback: true });
      const second = await registeredClient(store, 'mcp-upstream', url, 'https://sb.example/oauth/callback', { allowLoopback: true });
      assert.deepEqual(first, { clientId: 'dyn-1' });
      assert.deepEqual(second, first);
      assert.equal(fx.hits('/register').length, 1, 'the second call used the cached client');
      assert.ok(await store.getValue('client:mcp-upstream'));
      // A client registered with the shared redirect URI before per-provider ones is replaced.
      const moved = await registeredClient(store, 'mcp-upstream', url, 'https://sb.example/oauth/callback/mcp-upstream', { allowLoopback: true });
      assert.deepEqual(moved, { clientId: 'dyn-2' });
      assert.equal(fx.hits('/register').length, 2);
      assert.deepEqual((JSON.parse(fx.hits('/register')[1]!.body) as { redirect_uris: string[] }).redirect_uris, ['https://sb.example/oauth/callback/mcp-upstream']);
    } finally {
      await store.close();
    }
  });

  test('a client secret is stored sealed (and needs a cipher)', async () => {
    routes['/register'] = () => ({ status: 201, body: { client_id: 'conf-1', client_secret: 'DCR-SECRET-VALUE', client_secret_expires_at: 0 } });
    const store = new MemoryStore();
    try {
      const url = `${origin()}/register`;
      await assert.rejects(registeredClient(store, 'conf', url, 'https://sb.example/cb', { allowLoopback: true }), (err: Error) => !err.message.includes('DCR-SECRET'));
      const cipher = createTokenCipher('c'.repeat(32));
      const client = await registeredClient(store, 'conf', url, 'https://sb.example/cb', { allowLoopback: true, cipher });
      assert.deepEqual(client, { clientId: 'conf-1', clientSecret: 'DCR-SECRET-VALUE' });
      assert.ok(!(await store.getValue('client:conf'))!.includes('DCR-SECRET'));
      const again = await registeredClient(store, 'conf', url, 'https://sb.example/cb', { allowLoopback: true, cipher });
      assert.deepEqual(again, client);
      assert.equal(fx.hits('/register').length, 2);
    } finally {
      await store.close();
    }
  });
});
