/**
 * docker-compose.yml and the gateway config it mounts (SPEC §6). No Docker engine exists on
 * the build machine, so the stack cannot be started here; instead:
 *  - the compose file is parsed and checked for the four services, health checks,
 *    persistence, dependencies, and agreement with the Dockerfile and the mounted config;
 *  - the mounted config is validated by the app's own parser with exactly the environment
 *    compose gives the container;
 *  - the same config is then served by the real gateway (real Redis, real
 *    server-everything, real OAuth server process) with only network addresses swapped for
 *    local ones, and tokens shaped by the oauth service's JSON_CONFIG are sent through it —
 *    so "the issuer, audience, scope and Host settings fit together" is tested, not assumed.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { freePort } from '../helpers/free-port.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startRedis, type RedisHandle } from '../helpers/redis.js';
import { ROOT, composeInterpolateTree, composeVariablesInTree, execForm, parseDockerfile, readRepoFile } from './support.js';

const run = promisify(execFile);

interface Healthcheck {
  test: string[] | string;
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}
interface Service {
  image?: string;
  profiles?: string[];
  build?: { context: string; dockerfile?: string };
  command?: string[] | string;
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  tmpfs?: string[];
  read_only?: boolean;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: Healthcheck;
  stop_signal?: string;
  stop_grace_period?: string;
  cap_drop?: string[];
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

/** The compose file as parsed, before interpolation. */
const composeRaw: unknown = parseYaml(readRepoFile('docker-compose.yml'), { merge: true });
/** What `docker compose config` would see with an empty shell environment (no .env). */
const compose = composeInterpolateTree(composeRaw, {}) as ComposeFile;
const services = compose.services;
const dockerfile = parseDockerfile(readRepoFile('Dockerfile'));
const finalStage = dockerfile.stages.at(-1)!;
const entrypoint = execForm(finalStage.instructions.filter((i) => i.keyword === 'ENTRYPOINT').at(-1)!.args)!;
const configPathInImage = execForm(finalStage.instructions.filter((i) => i.keyword === 'CMD').at(-1)!.args)!.at(-1)!;

function service(name: string): Service {
  const s = services[name];
  assert.ok(s, `service ${name} is missing`);
  return s;
}

/** `HOST:CONTAINER` port mappings of a service as numbers. */
function published(s: Service): Array<{ host: number; container: number }> {
  return (s.ports ?? []).map((p) => {
    const parts = p.split(':').map(Number);
    return { host: parts.at(-2)!, container: parts.at(-1)! };
  });
}

/** The mounted gateway config: [path on the host, text]. */
function mountedConfig(): { file: string; text: string } {
  const mount = service('switchboard').volumes?.find((v) => v.split(':')[1] === configPathInImage);
  assert.ok(mount, `no volume mounts a file at ${configPathInImage} (the image's --config path)`);
  const [source, , mode] = mount.split(':');
  assert.equal(mode, 'ro', 'the config is mounted read-only');
  const file = source!.replace(/^\.\//, '');
  return { file, text: readRepoFile(file) };
}

const gatewayEnv = service('switchboard').environment ?? {};
const { file: configFile, text: configText } = mountedConfig();
const configRaw = parseYaml(configText) as Record<string, unknown>;
const config = parseConfig(configRaw, gatewayEnv);

/** The oauth service's JSON_CONFIG as mock-oauth2-server receives it. */
interface RequestMapping {
  requestParam: string;
  match: string;
  claims: Record<string, unknown>;
}
const oauthConfig = JSON.parse(service('oauth').environment!.JSON_CONFIG!) as {
  tokenCallbacks: Array<{ issuerId: string; tokenExpiry?: number; requestMappings: RequestMapping[] }>;
};

/**
 * The claims mock-oauth2-server puts into an access token for a token request to
 * /<issuerId>/token with these form parameters (its documented RequestMappingTokenCallback
 * rules: first mapping whose form parameter matches — exact, `*` or a regex — wins, and
 * `${clientId}`/`${param}` templates are filled from the request).
 */
function mockOAuthClaims(issuerId: string, form: Record<string, string>): Record<string, unknown> {
  const callback = oauthConfig.tokenCallbacks.find((c) => c.issuerId === issuerId);
  assert.ok(callback, `JSON_CONFIG has no tokenCallback for issuer ${issuerId}`);
  const mapping = callback.requestMappings.find((m) => {
    const value = form[m.requestParam];
    return value !== undefined && (m.match === '*' || m.match === value || new RegExp(`^(?:${m.match})$`).test(value));
  });
  assert.ok(mapping, `no requestMapping matches ${JSON.stringify(form)}`);
  const templates: Record<string, string> = { ...form, clientId: form.client_id ?? '', client_id: form.client_id ?? '' };
  const fill = (v: unknown): unknown =>
    typeof v === 'string' ? v.replace(/\$\{(\w+)\}/g, (whole, key: string) => templates[key] ?? whole) : Array.isArray(v) ? v.map(fill) : v;
  return Object.fromEntries(Object.entries(mapping.claims).map(([k, v]) => [k, fill(v)]));
}

describe('docker-compose.yml', () => {
  test('has the gateway, Redis, a demo backend and a development OAuth server (and the optional TLS front)', () => {
    // Services with `profiles` start only when one of them is asked for (compose's profiles rule).
    const always = Object.keys(services).filter((name) => !services[name]!.profiles);
    assert.deepEqual(always.sort(), ['everything', 'oauth', 'redis', 'switchboard']);
    assert.deepEqual(service('tls').profiles, ['tls']);
  });

  test('every service has a health check, in exec form', () => {
    for (const [name, s] of Object.entries(services)) {
      assert.ok(s.healthcheck, `${name} has no healthcheck`);
      assert.ok(Array.isArray(s.healthcheck.test) && s.healthcheck.test[0] === 'CMD', `${name}: healthcheck must be ["CMD", …] (no shell in the distroless image)`);
    }
  });

  test('the gateway is built from the Dockerfile, read-only with a tmpfs /tmp, and waits for healthy dependencies', () => {
    const gw = service('switchboard');
    assert.equal(gw.build?.context, '.');
    assert.equal(gw.build?.dockerfile, 'Dockerfile');
    assert.equal(gw.read_only, true);
    assert.ok(gw.tmpfs?.includes('/tmp'));
    assert.deepEqual(gw.cap_drop, ['ALL']);
    assert.deepEqual(Object.keys(gw.depends_on ?? {}).sort(), ['everything', 'oauth', 'redis']);
    for (const [dep, { condition }] of Object.entries(gw.depends_on!)) assert.equal(condition, 'service_healthy', `depends_on ${dep}`);
    assert.deepEqual(published(gw), [{ host: 8080, container: config.listen.port }]);
    // Graceful shutdown needs up to 25 s after SIGTERM.
    assert.ok(Number.parseInt(gw.stop_grace_period ?? '10', 10) >= 30);
  });

  test("the gateway's healthcheck is the image's HEALTHCHECK command (node, /healthz)", () => {
    const command = service('switchboard').healthcheck!.test as string[];
    const image = execForm(finalStage.instructions.find((i) => i.keyword === 'HEALTHCHECK')!.args.replace(/^(--\S+\s+)*CMD\s+/, ''))!;
    assert.deepEqual(command.slice(1), image);
    assert.equal(command[1], entrypoint[0]);
  });

  test('Redis persists to a named volume with the append-only file', () => {
    const redis = service('redis');
    assert.match(redis.image ?? '', /^redis:7(\.\d+)*-alpine$/);
    assert.deepEqual(redis.command, ['redis-server', '--appendonly', 'yes']);
    const data = redis.volumes?.find((v) => v.split(':')[1] === '/data');
    assert.ok(data, 'a volume at /data');
    const volume = data.split(':')[0]!;
    assert.ok(!volume.startsWith('.') && !volume.startsWith('/'), 'a named volume, not a bind mount');
    assert.ok(compose.volumes && volume in compose.volumes, `volume ${volume} is declared`);
    assert.deepEqual(redis.healthcheck!.test, ['CMD', 'redis-cli', 'ping']);
  });

  test('the demo backend runs server-everything (a production dependency) from the gateway image', () => {
    const demo = service('everything');
    const gw = service('switchboard');
    assert.equal(demo.image, gw.image);
    assert.deepEqual(demo.build, gw.build);
    const command = demo.command as string[];
    assert.equal(command[0], 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
    assert.equal(command[1], 'streamableHttp');
    assert.ok(existsSync(join(ROOT, command[0]!)), `${command[0]} exists`);
    const pkg = JSON.parse(readRepoFile('package.json')) as { dependencies: Record<string, string> };
    assert.ok(pkg.dependencies['@modelcontextprotocol/server-everything'], 'in dependencies, so it is in the runtime image');
    assert.equal(demo.environment?.PORT, '3001');
    assert.equal(demo.stop_signal, 'SIGINT', 'server-everything only handles SIGINT');
    assert.equal(demo.read_only, true);
    const backend = new URL(config.backends[0]!.url!);
    assert.equal(backend.hostname, 'everything');
    assert.equal(backend.port, demo.environment?.PORT);
    assert.equal(backend.pathname, '/mcp');
  });

  test('the OAuth server image is pinned, published on 9000, and health-checked', () => {
    const oauth = service('oauth');
    assert.match(oauth.image ?? '', /^ghcr\.io\/navikt\/mock-oauth2-server:\d+\.\d+\.\d+$/);
    const [port] = published(oauth);
    assert.deepEqual(port, { host: 9000, container: Number(oauth.environment?.SERVER_PORT) });
    assert.match((oauth.healthcheck!.test as string[]).join(' '), /\/isalive/);
  });

  test('compose variables all have development defaults, so `docker compose up` needs no .env', () => {
    const variables = composeVariablesInTree(composeRaw);
    assert.ok(variables.length > 0);
    for (const v of variables) assert.ok(v.fallback !== undefined && v.fallback !== '', `\${${v.name}} has no default`);
  });

  test('placeholder secrets are marked as development-only and are long enough', () => {
    for (const key of ['COOKIE_KEY', 'TOKEN_KEY', 'LOGIN_SECRET']) {
      const value = gatewayEnv[key];
      assert.ok(value, `${key} is set`);
      assert.match(value, /dev-only/);
      assert.match(value, /NOT-A-SECRET/);
    }
    assert.ok(gatewayEnv.COOKIE_KEY!.length >= 32 && gatewayEnv.TOKEN_KEY!.length >= 32);
  });
});

describe('deploy/compose/switchboard.yaml (mounted gateway config)', () => {
  test('is a valid Switchboard config with the environment compose provides', () => {
    assert.equal(configFile, 'deploy/compose/switchboard.yaml');
    assert.equal(config.publicUrl, 'http://localhost:8080');
    assert.equal(config.secrets.cookieKey, gatewayEnv.COOKIE_KEY);
    assert.equal(config.secrets.tokenKey, gatewayEnv.TOKEN_KEY);
    assert.equal(config.auth.login?.clientSecret, gatewayEnv.LOGIN_SECRET);
  });

  test('every ${VAR} in it is provided by the switchboard service environment', () => {
    const used = [...JSON.stringify(configRaw).matchAll(/(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!);
    assert.ok(used.length > 0);
    for (const name of used) assert.ok(name in gatewayEnv, `\${${name}} is not in services.switchboard.environment`);
    assert.throws(() => parseConfig(configRaw, {}), /environment variable \w+ is not set/);
  });

  test('its addresses point at the compose services and published ports', () => {
    assert.equal(new URL(config.redis!.url!).hostname, 'redis');
    const oauth = published(service('oauth'))[0]!;
    assert.equal(config.auth.issuer, `http://localhost:${oauth.host}/default`, 'iss = the URL tokens are requested through from the host');
    assert.equal(config.auth.jwksUri, `http://oauth:${oauth.container}/default/jwks`, 'keys fetched over the compose network');
    assert.equal(new URL(config.publicUrl).port, String(published(service('switchboard'))[0]!.host));
    assert.equal(config.auth.audience, `${config.publicUrl}/mcp`);
    assert.ok(config.allowedHosts.includes(`switchboard:${config.listen.port}`));
  });

  test("the OAuth server's JSON_CONFIG gives tokens the gateway's audience and required scopes", () => {
    const issuerId = new URL(config.auth.issuer).pathname.slice(1);
    const cc = mockOAuthClaims(issuerId, { grant_type: 'client_credentials', client_id: 'alice', client_secret: 'x', scope: 'mcp' });
    assert.equal(cc.sub, 'alice');
    assert.deepEqual(cc.aud, [config.auth.audience]);
    for (const scope of config.auth.requiredScopes) assert.ok(String(cc.scope).split(' ').includes(scope));
    const code = mockOAuthClaims(issuerId, { grant_type: 'authorization_code', client_id: 'switchboard-web', code: 'c' });
    assert.equal(code.sub, undefined, 'authorization-code tokens take the login user name as sub');
    assert.ok((code.aud as string[]).includes(config.auth.audience));
    assert.ok((code.aud as string[]).includes('switchboard-web'), 'the ID token (same claims) needs the client id in aud');
  });
});

describe('the compose config served by the real gateway', () => {
  let redis: RedisHandle;
  let everything: EverythingHandle;
  let oauth: OAuthHandle;
  let server: RunningServer;
  let port: number;
  const host = new URL(config.publicUrl).host;

  before(async () => {
    [redis, everything, oauth, port] = await Promise.all([startRedis(), startEverything(), startOAuthServer(), freePort()]);
    // Only network locations change: the compose service names become local processes.
    const local = structuredClone(configRaw) as {
      listen: { host: string; port: number };
      redis: { url: string };
      auth: { jwksUri: string };
      backends: Array<{ url: string }>;
      log: { level: string };
    };
    local.listen = { host: '127.0.0.1', port };
    local.redis.url = redis.url;
    local.auth.jwksUri = oauth.jwksUri;
    local.backends[0]!.url = everything.url;
    local.log.level = 'silent';
    server = await startServer(parseConfig(local, gatewayEnv));
  });

  after(async () => {
    await server?.close();
    await Promise.allSettled([redis?.stop(), everything?.stop(), oauth?.stop()]);
  });

  /** POST a JSON-RPC message to /mcp/everything with the Host a client on the compose host sends. */
  function post(token: string | undefined, body: unknown, sessionId?: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: `/mcp/${config.backends[0]!.name}`,
          method: 'POST',
          headers: {
            host,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...(token ? { authorization: `Bearer ${token}` } : {}),
            ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' } : {}),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.setTimeout(15_000, () => req.destroy(new Error('request timed out')));
      req.end(JSON.stringify(body));
    });
  }

  /** The JSON-RPC message in a JSON or SSE answer. */
  function message(text: string): { result?: Record<string, unknown>; error?: unknown } {
    const data = text.trim().startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean).at(-1);
    assert.ok(data, `no JSON-RPC message in ${text.slice(0, 200)}`);
    return JSON.parse(data) as { result?: Record<string, unknown> };
  }

  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'compose-test', version: '1' } },
  };

  /** A token with the claims mock-oauth2-server would issue for the curl command of docs/deploy.md (Docker Compose). */
  function composeToken(clientId: string): Promise<string> {
    const issuerId = new URL(config.auth.issuer).pathname.slice(1);
    const claims = mockOAuthClaims(issuerId, { grant_type: 'client_credentials', client_id: clientId, client_secret: 'any', scope: 'mcp' });
    return oauth.token({ sub: String(claims.sub), aud: claims.aud as string[], scope: String(claims.scope), claims: { iss: config.auth.issuer } });
  }

  test('a token as docs/deploy.md obtains it opens a session and lists the demo tools', async () => {
    const token = await composeToken('alice');
    const init = await post(token, initialize);
    assert.equal(init.status, 200, init.text);
    const sessionId = init.headers['mcp-session-id'];
    assert.equal(typeof sessionId, 'string');
    assert.ok(message(init.text).result?.serverInfo);
    assert.equal((await post(token, { jsonrpc: '2.0', method: 'notifications/initialized' }, sessionId as string)).status, 202);
    const list = await post(token, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, sessionId as string);
    assert.equal(list.status, 200, list.text);
    const tools = (message(list.text).result?.tools ?? []) as Array<{ name: string }>;
    assert.ok(tools.some((t) => t.name === 'echo'), `tools: ${tools.map((t) => t.name).join(', ')}`);
  });

  test("without the JSON_CONFIG mapping (mock-oauth2-server's default aud) the token is refused", async () => {
    const token = await oauth.token({ sub: 'alice', aud: ['default'], scope: 'mcp', claims: { iss: config.auth.issuer } });
    const res = await post(token, initialize);
    assert.equal(res.status, 401);
  });

  test('a token without the scope "mcp" gets 403 insufficient_scope; no token gets 401 with metadata', async () => {
    const token = await oauth.token({ sub: 'alice', aud: [config.auth.audience], claims: { iss: config.auth.issuer } });
    const res = await post(token, initialize);
    assert.equal(res.status, 403);
    assert.match(String(res.headers['www-authenticate']), /insufficient_scope/);
    const anonymous = await post(undefined, initialize);
    assert.equal(anonymous.status, 401);
    assert.match(String(anonymous.headers['www-authenticate']), new RegExp(`resource_metadata="${config.publicUrl}/\\.well-known/oauth-protected-resource/mcp`));
  });

  test("the demo backend's compose healthcheck script passes against server-everything", async () => {
    const script = (service('everything').healthcheck!.test as string[])[3]!;
    const port = service('everything').environment!.PORT!;
    assert.ok(script.includes(`connect(${port},'127.0.0.1')`), 'checks the port the service listens on');
    const local = script.replace(`connect(${port},`, `connect(${new URL(everything.url).port},`);
    await run(process.execPath, ['-e', local], { timeout: 10_000 });
    const closed = await freePort();
    await assert.rejects(run(process.execPath, ['-e', script.replace(`connect(${port},`, `connect(${closed},`)], { timeout: 10_000 }));
  });
});
