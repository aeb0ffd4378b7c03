/**
 * The resource-server surface of the REAL gateway over HTTP (SPEC §2; MCP 2025-11-25
 * "Authorization"; RFC 6750 §3; RFC 9728): 401/403 challenges, which tokens are refused,
 * no tokens in the query string, protected-resource metadata, health endpoints, and no
 * token passthrough to backends.
 *
 * Parts: the gateway in-process (startGateway), two real OAuth server processes (ours and
 * a foreign one), server-everything as a real backend, and a small recording HTTP backend
 * that shows exactly which headers the gateway sends upstream.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startGateway, type GatewayHandle } from '../helpers/gateway.js';
import { startOAuthServer, unsignedToken, type OAuthHandle } from '../helpers/oauth.js';

const PROTOCOL = '2025-11-25';
const BACKEND = 'everything';
const SCOPED_BACKEND = 'repo';

let idp: OAuthHandle;
let foreignIdp: OAuthHandle;
let everything: EverythingHandle;
/** No required scopes. */
let open: GatewayHandle;
/** requiredScopes [mcp]; backend `repo` additionally needs `repo-tools`. Its audience is a fixed string. */
let scoped: GatewayHandle;
const SCOPED_AUDIENCE = 'https://switchboard.test/mcp';

before(async () => {
  [idp, foreignIdp, everything] = await Promise.all([startOAuthServer(), startOAuthServer(), startEverything()]);
  open = await startGateway({ issuer: idp.issuer, backends: [{ name: BACKEND, url: everything.url }] });
  scoped = await startGateway({
    issuer: idp.issuer,
    backends: [
      { name: BACKEND, url: everything.url },
      { name: SCOPED_BACKEND, url: everything.url, access: { scopes: ['repo-tools'] } },
    ],
    // `auth` replaces the generated one wholesale, and the gateway's port (hence its URL) is
    // chosen inside startGateway, so this gateway uses an audience that is not its URL.
    overrides: { auth: { issuer: idp.issuer, audience: SCOPED_AUDIENCE, requiredScopes: ['mcp'], algorithms: ['RS256', 'ES256'] } },
  });
});
after(async () => {
  await Promise.allSettled([open?.close(), scoped?.close()]);
  await Promise.allSettled([idp?.stop(), foreignIdp?.stop(), everything?.stop()]);
});

const initializeBody = (id: number | string = 1) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'http-auth-test', version: '1.0.0' } } });

const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

async function post(url: string | URL, headers: Record<string, string>, body = initializeBody()): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { ...MCP_HEADERS, ...headers }, body, signal: AbortSignal.timeout(10_000) });
}

/** Reads and returns the body so no connection is left half-read. */
async function bodyOf(res: Response): Promise<string> {
  return res.text();
}

/** Parses `Bearer a="x", b="y"` into its scheme and attributes. */
function parseChallenge(header: string | null): { scheme: string; params: Record<string, string> } {
  assert.ok(header, 'a WWW-Authenticate header is present');
  const match = /^(\S+)\s+(.*)$/.exec(header);
  assert.ok(match, `challenge has a scheme and parameters: ${header}`);
  const params: Record<string, string> = {};
  for (const m of match[2]!.matchAll(/([A-Za-z_]+)="([^"]*)"/g)) params[m[1]!] = m[2]!;
  return { scheme: match[1]!, params };
}

function metadataUrl(gateway: GatewayHandle, backend?: string): string {
  return `${gateway.url}/.well-known/oauth-protected-resource/mcp${backend ? `/${backend}` : ''}`;
}

async function assertInvalidToken(res: Response, gateway: GatewayHandle, backend: string, why: string): Promise<void> {
  const body = await bodyOf(res);
  assert.equal(res.status, 401, `${why}: status (body ${body})`);
  const { scheme, params } = parseChallenge(res.headers.get('www-authenticate'));
  assert.equal(scheme, 'Bearer', why);
  assert.equal(params.error, 'invalid_token', `${why}: error attribute`);
  assert.equal(params.resource_metadata, metadataUrl(gateway, backend), `${why}: resource_metadata`);
  assert.equal(JSON.parse(body).error, 'invalid_token', `${why}: JSON body`);
}

describe('401 without a token', () => {
  test('POST/GET/DELETE /mcp/{backend} with no token → 401 and a bare resource_metadata challenge', async () => {
    const res = await post(open.endpoint(BACKEND), {});
    const body = await bodyOf(res);
    assert.equal(res.status, 401, body);
    assert.equal(res.headers.get('www-authenticate'), `Bearer resource_metadata="${open.url}/.well-known/oauth-protected-resource/mcp/${BACKEND}"`);
    assert.doesNotMatch(res.headers.get('www-authenticate')!, /error=/, 'no error attribute without a token (RFC 6750 §3.1)');
    assert.doesNotMatch(res.headers.get('www-authenticate')!, /scope=/, 'no scope attribute when no scopes are configured');

    for (const method of ['GET', 'DELETE']) {
      const other = await fetch(open.endpoint(BACKEND), {
        method,
        headers: { accept: 'text/event-stream', 'mcp-session-id': 'x'.repeat(43), 'mcp-protocol-version': PROTOCOL },
        signal: AbortSignal.timeout(10_000),
      });
      await bodyOf(other);
      assert.equal(other.status, 401, `${method} without a token`);
      assert.equal(parseChallenge(other.headers.get('www-authenticate')).params.resource_metadata, metadataUrl(open, BACKEND));
    }
  });

  test('with scopes configured, the no-token challenge also names them', async () => {
    const res = await post(scoped.endpoint(BACKEND), {});
    await bodyOf(res);
    assert.equal(res.status, 401);
    const { scheme, params } = parseChallenge(res.headers.get('www-authenticate'));
    assert.equal(scheme, 'Bearer');
    assert.deepEqual(params, { resource_metadata: metadataUrl(scoped, BACKEND), scope: 'mcp' });
  });

  test('a token in the query string is not accepted', async () => {
    const token = await idp.token({ sub: 'alice', aud: open.audience });
    const url = open.endpoint(BACKEND);
    url.searchParams.set('access_token', token);
    const res = await post(url, {});
    await bodyOf(res);
    assert.equal(res.status, 401);
    const { params } = parseChallenge(res.headers.get('www-authenticate'));
    assert.equal(params.error, undefined, 'treated as no token at all');
    // The very same token in the header is fine (positive control).
    const ok = await post(open.endpoint(BACKEND), { authorization: `Bearer ${token}` });
    await bodyOf(ok);
    assert.equal(ok.status, 200);
  });

  test('a token in a form body is not accepted either', async () => {
    const token = await idp.token({ sub: 'alice', aud: open.audience });
    const res = await fetch(open.endpoint(BACKEND), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: MCP_HEADERS.accept },
      body: new URLSearchParams({ access_token: token }).toString(),
      signal: AbortSignal.timeout(10_000),
    });
    await bodyOf(res);
    assert.equal(res.status, 401);
  });
});

describe('401 invalid_token for bad tokens', () => {
  test('wrong audience, expired, wrong issuer, alg none, garbage', async () => {
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, string]> = [
      ['wrong audience', await idp.token({ sub: 'alice', aud: 'https://another-resource.example/mcp' })],
      ['audience of another gateway', await idp.token({ sub: 'alice', aud: SCOPED_AUDIENCE })],
      ['expired', await idp.token({ sub: 'alice', aud: open.audience, expiresIn: -300 })],
      ['wrong issuer (a second OAuth server)', await foreignIdp.token({ sub: 'alice', aud: open.audience })],
      ['iss claim of another issuer', await idp.token({ sub: 'alice', aud: open.audience, claims: { iss: foreignIdp.issuer } })],
      ['alg none', unsignedToken({ iss: idp.issuer, sub: 'alice', aud: open.audience, iat: now, exp: now + 3600 })],
      ['garbage', 'garbage'],
      ['garbage with dots', 'aaa.bbb.ccc'],
    ];
    for (const [why, token] of cases) {
      await assertInvalidToken(await post(open.endpoint(BACKEND), { authorization: `Bearer ${token}` }), open, BACKEND, why);
    }
  });

  test('a non-Bearer Authorization header (Basic xyz) → 401 Bearer challenge', async () => {
    // RFC 6750 §3.1: a request that used an unsupported authentication method is treated
    // like one without credentials — the challenge SHOULD NOT carry an error code. So the
    // gateway answers 401 with the Bearer challenge and resource_metadata, without error=.
    const res = await post(open.endpoint(BACKEND), { authorization: 'Basic xyz' });
    const body = await bodyOf(res);
    assert.equal(res.status, 401, body);
    const { scheme, params } = parseChallenge(res.headers.get('www-authenticate'));
    assert.equal(scheme, 'Bearer');
    assert.equal(params.resource_metadata, metadataUrl(open, BACKEND));
    assert.equal(params.error, undefined);
  });

  test('a valid token of the right issuer and audience passes (positive control)', async () => {
    for (const alg of ['RS256', 'ES256'] as const) {
      const token = await idp.token({ sub: 'alice', aud: open.audience, alg });
      const res = await post(open.endpoint(BACKEND), { authorization: `Bearer ${token}` });
      const body = await bodyOf(res);
      assert.equal(res.status, 200, `${alg}: ${body}`);
      assert.ok(res.headers.get('mcp-session-id'), 'the gateway opened a session');
      assert.match(body, /"protocolVersion"/);
    }
  });
});

describe('403 insufficient_scope', () => {
  test('a token lacking the required scope → 403 with error="insufficient_scope" and scope="mcp"', async () => {
    const token = await idp.token({ sub: 'alice', aud: SCOPED_AUDIENCE, scope: 'openid profile' });
    const res = await post(scoped.endpoint(BACKEND), { authorization: `Bearer ${token}` });
    const body = await bodyOf(res);
    assert.equal(res.status, 403, body);
    const { scheme, params } = parseChallenge(res.headers.get('www-authenticate'));
    assert.equal(scheme, 'Bearer');
    assert.equal(params.error, 'insufficient_scope');
    assert.equal(params.scope, 'mcp');
    assert.equal(params.resource_metadata, metadataUrl(scoped, BACKEND));
    assert.equal(JSON.parse(body).error, 'insufficient_scope');
  });

  test("a backend's own access scopes are required on top of the global ones", async () => {
    const onlyMcp = await idp.token({ sub: 'alice', aud: SCOPED_AUDIENCE, scope: 'mcp' });
    const res = await post(scoped.endpoint(SCOPED_BACKEND), { authorization: `Bearer ${onlyMcp}` });
    await bodyOf(res);
    assert.equal(res.status, 403);
    const { params } = parseChallenge(res.headers.get('www-authenticate'));
    assert.equal(params.error, 'insufficient_scope');
    assert.deepEqual(params.scope!.split(' ').sort(), ['mcp', 'repo-tools']);
    assert.equal(params.resource_metadata, metadataUrl(scoped, SCOPED_BACKEND));

    // The same token is enough for the backend that needs only `mcp`…
    const plain = await post(scoped.endpoint(BACKEND), { authorization: `Bearer ${onlyMcp}` });
    await bodyOf(plain);
    assert.equal(plain.status, 200);
    // …and a token with both scopes reaches the scoped backend.
    const both = await idp.token({ sub: 'alice', aud: SCOPED_AUDIENCE, scope: 'mcp repo-tools' });
    const ok = await post(scoped.endpoint(SCOPED_BACKEND), { authorization: `Bearer ${both}` });
    await bodyOf(ok);
    assert.equal(ok.status, 200);
  });

  test('a bad token on the scoped gateway is still 401 invalid_token (not 403)', async () => {
    const token = await idp.token({ sub: 'alice', aud: 'https://wrong.example', scope: 'mcp' });
    const res = await post(scoped.endpoint(BACKEND), { authorization: `Bearer ${token}` });
    await bodyOf(res);
    assert.equal(res.status, 401);
    assert.equal(parseChallenge(res.headers.get('www-authenticate')).params.error, 'invalid_token');
  });
});

describe('protected-resource metadata (RFC 9728)', () => {
  test('root, /mcp and /mcp/{backend} documents', async () => {
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp', `/.well-known/oauth-protected-resource/mcp/${BACKEND}`]) {
      const res = await fetch(`${open.url}${path}`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(res.status, 200, path);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/, path);
      const doc = (await res.json()) as Record<string, unknown>;
      // RFC 9728 §3.3: each document names the resource its URL was built from; the root one, the audience.
      const expected = path.endsWith(`/mcp/${BACKEND}`) ? `${open.url}/mcp/${BACKEND}` : path.endsWith('/mcp') ? `${open.url}/mcp` : open.audience;
      assert.equal(doc.resource, expected, `${path}: resource`);
      assert.deepEqual(doc.authorization_servers, [idp.issuer], path);
      assert.deepEqual(doc.scopes_supported, [], path);
      assert.deepEqual(doc.bearer_methods_supported, ['header'], path);
    }
  });

  test('scopes_supported lists the required scopes, plus the backend’s own on its document', async () => {
    const get = async (path: string) => {
      const res = await fetch(`${scoped.url}${path}`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(res.status, 200, path);
      return (await res.json()) as Record<string, unknown>;
    };
    const root = await get('/.well-known/oauth-protected-resource');
    assert.equal(root.resource, SCOPED_AUDIENCE);
    assert.deepEqual(root.authorization_servers, [idp.issuer]);
    assert.deepEqual(root.scopes_supported, ['mcp']);
    assert.deepEqual(root.bearer_methods_supported, ['header']);
    assert.deepEqual((await get('/.well-known/oauth-protected-resource/mcp')).scopes_supported, ['mcp']);
    assert.deepEqual((await get(`/.well-known/oauth-protected-resource/mcp/${BACKEND}`)).scopes_supported, ['mcp']);
    const repo = await get(`/.well-known/oauth-protected-resource/mcp/${SCOPED_BACKEND}`);
    assert.deepEqual([...(repo.scopes_supported as string[])].sort(), ['mcp', 'repo-tools']);
    assert.equal(repo.resource, `${scoped.url}/mcp/${SCOPED_BACKEND}`);
  });

  test('an unknown backend has no metadata → 404', async () => {
    const res = await fetch(metadataUrl(open, 'no-such-backend'), { signal: AbortSignal.timeout(10_000) });
    await bodyOf(res);
    assert.equal(res.status, 404);
  });

  test('metadata needs no token', async () => {
    const res = await fetch(metadataUrl(open, BACKEND), { headers: { authorization: 'Bearer garbage' }, signal: AbortSignal.timeout(10_000) });
    await bodyOf(res);
    assert.equal(res.status, 200);
  });
});

describe('health', () => {
  test('/healthz and /readyz answer 200 without a token', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await fetch(`${open.url}${path}`, { signal: AbortSignal.timeout(10_000) });
      const body = await bodyOf(res);
      assert.equal(res.status, 200, `${path}: ${body}`);
      assert.ok(JSON.parse(body).status, `${path} reports a status`);
    }
  });
});

// ------------------------------------------------------------------------------------------

interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A minimal Streamable HTTP MCP backend that records every request. It answers initialize
 * with a JSON result and its own `mcp-session-id`, notifications with 202, other requests
 * with an empty JSON result, and DELETE with 200.
 */
async function startRecordingBackend(): Promise<{ url: string; requests: Recorded[]; close(): Promise<void> }> {
  const requests: Recorded[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      if (req.method === 'DELETE') {
        res.writeHead(200).end();
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(405, { allow: 'POST, DELETE' }).end();
        return;
      }
      const message = JSON.parse(body) as { id?: number | string; method?: string };
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const result =
        message.method === 'initialize'
          ? { protocolVersion: PROTOCOL, capabilities: {}, serverInfo: { name: 'rec', version: '1' } }
          : message.method === 'tools/list'
            ? { tools: [] }
            : {};
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'rec-backend-session' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('no token passthrough', () => {
  test("the client's Authorization and cookies never reach the backend; the protocol version does", async (t) => {
    const recorder = await startRecordingBackend();
    t.after(() => recorder.close());
    const gateway = await startGateway({ issuer: idp.issuer, backends: [{ name: 'rec', url: recorder.url }] });
    t.after(() => gateway.close());

    const token = await idp.token({ sub: 'alice', aud: gateway.audience, scope: 'mcp' });
    const clientHeaders = {
      authorization: `Bearer ${token}`,
      cookie: 'sb_session=browser-secret; other=1',
      'x-forwarded-for': '203.0.113.9',
    };

    const init = await post(gateway.endpoint('rec'), clientHeaders);
    const initBody = await bodyOf(init);
    assert.equal(init.status, 200, initBody);
    assert.equal(JSON.parse(initBody).result.serverInfo.name, 'rec');
    const sessionId = init.headers.get('mcp-session-id');
    assert.ok(sessionId, 'gateway session id');
    assert.notEqual(sessionId, 'rec-backend-session', "the client gets the gateway's session id, not the backend's");

    const later = { ...clientHeaders, 'mcp-session-id': sessionId };
    const initialized = await post(gateway.endpoint('rec'), { ...later, 'mcp-protocol-version': PROTOCOL }, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    await bodyOf(initialized);
    assert.equal(initialized.status, 202);

    const list = await post(gateway.endpoint('rec'), { ...later, 'mcp-protocol-version': PROTOCOL }, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    const listBody = await bodyOf(list);
    assert.equal(list.status, 200, listBody);
    assert.deepEqual(JSON.parse(listBody), { jsonrpc: '2.0', id: 2, result: { tools: [] } });

    // Without the header from the client, the gateway still tells the backend the negotiated version.
    const ping = await post(gateway.endpoint('rec'), later, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }));
    await bodyOf(ping);
    assert.equal(ping.status, 200);

    const del = await fetch(gateway.endpoint('rec'), { method: 'DELETE', headers: { ...later, 'mcp-protocol-version': PROTOCOL }, signal: AbortSignal.timeout(10_000) });
    await bodyOf(del);
    assert.equal(del.status, 204);

    const seen = recorder.requests;
    assert.deepEqual(
      seen.map((r) => `${r.method} ${(JSON.parse(r.body || '{}') as { method?: string }).method ?? ''}`.trim()),
      // First the era probe (a backend of unknown era is asked server/discover, issue 42 cause 1);
      // the GET is the standalone stream the gateway opens once the session is initialized (issue 13).
      ['POST server/discover', 'POST initialize', 'POST notifications/initialized', 'GET', 'POST tools/list', 'POST ping', 'DELETE'],
    );
    for (const r of seen) {
      const what = `${r.method} ${r.body.slice(0, 60)}`;
      assert.equal(r.headers.authorization, undefined, `${what}: no Authorization header reached the backend`);
      assert.equal(r.headers.cookie, undefined, `${what}: no cookie reached the backend`);
      assert.ok(!JSON.stringify(r.headers).includes(token), `${what}: the token appears in no header`);
      assert.ok(!r.body.includes(token) && !r.url.includes(token), `${what}: the token appears nowhere in the request`);
      assert.notEqual(r.headers['mcp-session-id'], sessionId, `${what}: the gateway's own session id is not sent upstream`);
    }
    assert.equal(seen[0]!.headers['mcp-session-id'], undefined, 'the probe carries no session id');
    assert.equal(seen[1]!.headers['mcp-session-id'], undefined, 'initialize carries no session id');
    for (const r of seen.slice(2)) {
      const what = `${r.method} ${r.body.slice(0, 60)}`;
      assert.equal(r.headers['mcp-protocol-version'], PROTOCOL, `${what}: carries the negotiated MCP-Protocol-Version`);
      assert.equal(r.headers['mcp-session-id'], 'rec-backend-session', `${what}: carries the backend's own session id`);
    }
  });
});
