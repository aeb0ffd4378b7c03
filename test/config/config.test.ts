/**
 * The configuration contract (SPEC §3): the full example parses, defaults are filled in,
 * durations become milliseconds, `${VAR}` interpolation (and the `$${X}` escape), errors
 * that name the key and the problem, and where the config file is found.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { parseDuration } from '../../src/config/duration.js';
import { ConfigError, formatKey } from '../../src/config/errors.js';
import { findConfigFile, loadConfigFile, parseConfig } from '../../src/config/load.js';

/** SPEC §3's example, verbatim except `jwksUri: …` (a placeholder there) made a real URL. */
const SPEC_EXAMPLE = `
publicUrl: https://mcp.example.com        # origin used in metadata, connect URLs, cookies
listen: { host: 0.0.0.0, port: 8080 }
allowedOrigins: [https://claude.ai]       # plus publicUrl's origin
redis:                                    # omitted → in-memory (one replica only; logs a warning)
  url: redis://redis:6379/0               # rediss:// and sentinel/cluster URLs too
  keyPrefix: "sb:"
auth:
  issuer: https://idp.example.com/realms/acme   # OIDC discovery → jwks_uri
  audience: https://mcp.example.com/mcp         # RFC 8707 resource; tokens for anything else → 401
  jwksUri: https://idp.example.com/realms/acme/protocol/openid-connect/certs
  algorithms: [RS256, ES256, EdDSA]
  requiredScopes: [mcp]                         # optional
  tenantClaim: org                              # optional: claim that names the tenant
  login: { clientId: switchboard-web, clientSecret: "\${LOGIN_SECRET}", scopes: [openid, profile] }
secrets:
  cookieKey: "\${COOKIE_KEY}"                    # ≥ 32 bytes
  tokenKey: "\${TOKEN_KEY}"                      # AES-256-GCM key for third-party tokens at rest
sessions: { idleTtl: 24h }
backends:
  - name: github                                # [a-z0-9-]+ ; endpoint /mcp/github
    url: https://api.githubcopilot.com/mcp/
    transport: streamable-http                  # | sse | stdio (command/args/env)
    headers: { X-Team: "\${TEAM}" }              # static headers
    timeout: 60s
    access: { scopes: [repo-tools], tenants: [acme], claims: { groups: [eng] } }
    upstreamAuth:                               # third-party OAuth per user (§4)
      provider: github                          # vault key; backends may share a provider
      discover: true                            # from the backend's 401 + RFC 9728 metadata, or:
      authorizationUrl: https://github.com/login/oauth/authorize
      tokenUrl: https://github.com/login/oauth/access_token
      clientId: "\${GH_CLIENT_ID}"
      clientSecret: "\${GH_CLIENT_SECRET}"
      scopes: [repo]
`;

const SPEC_ENV: NodeJS.ProcessEnv = {
  LOGIN_SECRET: 'login-secret-value',
  COOKIE_KEY: 'c'.repeat(32),
  TOKEN_KEY: 't'.repeat(44),
  TEAM: 'platform',
  GH_CLIENT_ID: 'gh-client-id',
  GH_CLIENT_SECRET: 'gh-client-secret',
};

/** The smallest valid config; tests spread their change over it. */
function minimal(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [{ name: 'demo', url: 'http://127.0.0.1:9999/mcp' }],
    ...extra,
  };
}

/** Asserts that `fn` throws a ConfigError naming `key`, with a message matching `problem`. */
function assertConfigError(fn: () => unknown, key: string, problem?: RegExp): ConfigError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof ConfigError, `expected a ConfigError, got ${caught === undefined ? 'no error' : String(caught)}`);
  assert.equal(caught.key, key, `error names the key: ${caught.message}`);
  assert.ok(caught.message.includes(key || '(root)'), `message "${caught.message}" names ${key}`);
  if (problem) assert.match(caught.message, problem);
  return caught;
}

const tempDirs: string[] = [];
function tempDir(): string {
  // realpath: on some systems tmpdir() is a symlink, and resolve() keeps what it is given.
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'sb-config-test-')));
  tempDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

describe('parseConfig: the SPEC §3 example', () => {
  test('accepts the full example with its variables supplied', () => {
    const config = parseConfig(parseYaml(SPEC_EXAMPLE), SPEC_ENV);
    assert.equal(config.publicUrl, 'https://mcp.example.com');
    assert.deepEqual(config.listen, { host: '0.0.0.0', port: 8080 });
    assert.deepEqual(config.allowedOrigins, ['https://claude.ai']);
    assert.deepEqual(config.redis, { mode: 'standalone', url: 'redis://redis:6379/0', keyPrefix: 'sb:', unavailableWait: 5_000 });
    assert.equal(config.auth.issuer, 'https://idp.example.com/realms/acme');
    assert.equal(config.auth.audience, 'https://mcp.example.com/mcp');
    assert.equal(config.auth.jwksUri, 'https://idp.example.com/realms/acme/protocol/openid-connect/certs');
    assert.deepEqual(config.auth.algorithms, ['RS256', 'ES256', 'EdDSA']);
    assert.deepEqual(config.auth.requiredScopes, ['mcp']);
    assert.equal(config.auth.tenantClaim, 'org');
    assert.deepEqual(config.auth.login, { clientId: 'switchboard-web', clientSecret: 'login-secret-value', scopes: ['openid', 'profile'] });
    assert.deepEqual(config.secrets, { cookieKey: SPEC_ENV.COOKIE_KEY, tokenKey: SPEC_ENV.TOKEN_KEY });
    assert.equal(config.sessions.idleTtl, 24 * 3_600_000);

    assert.equal(config.backends.length, 1);
    const github = config.backends[0]!;
    assert.equal(github.name, 'github');
    assert.equal(github.url, 'https://api.githubcopilot.com/mcp/');
    assert.equal(github.transport, 'streamable-http');
    assert.deepEqual(github.headers, { 'X-Team': 'platform' });
    assert.equal(github.timeout, 60_000);
    assert.deepEqual(github.access, { scopes: ['repo-tools'], tenants: ['acme'], claims: { groups: ['eng'] }, tools: { allow: [], deny: [] } });
    assert.deepEqual(github.upstreamAuth, {
      provider: 'github',
      discover: true,
      authorizationUrl: 'https://github.com/login/oauth/authorize',
      tokenUrl: 'https://github.com/login/oauth/access_token',
      clientId: 'gh-client-id',
      clientSecret: 'gh-client-secret',
      scopes: ['repo'],
      shareCatalog: [],
    });
  });

  test('the same example loads from a YAML file', () => {
    const dir = tempDir();
    const file = join(dir, 'switchboard.yaml');
    writeFileSync(file, SPEC_EXAMPLE);
    const config = loadConfigFile(file, SPEC_ENV);
    assert.deepEqual(config, parseConfig(parseYaml(SPEC_EXAMPLE), SPEC_ENV));
    assert.equal(config.secrets.cookieKey, SPEC_ENV.COOKIE_KEY);
  });

  test('the example without its variables fails on the first key that needs one', () => {
    assertConfigError(() => parseConfig(parseYaml(SPEC_EXAMPLE), {}), 'auth.login.clientSecret', /LOGIN_SECRET/);
  });
});

describe('parseConfig: defaults and normalisation', () => {
  test('fills every default', () => {
    const config = parseConfig(minimal());
    assert.deepEqual(config.listen, { host: '0.0.0.0', port: 8080 });
    assert.deepEqual(config.allowedOrigins, []);
    assert.deepEqual(config.allowedHosts, []);
    assert.equal(config.redis, undefined, 'no redis → in-memory');
    assert.deepEqual(config.auth.algorithms, ['RS256', 'ES256', 'EdDSA']);
    assert.deepEqual(config.auth.requiredScopes, []);
    assert.equal(config.auth.clockTolerance, 30_000);
    assert.equal(config.auth.jwksUri, undefined);
    assert.equal(config.auth.login, undefined);
    assert.deepEqual(config.secrets, {});
    assert.equal(config.sessions.idleTtl, 24 * 3_600_000);
    assert.deepEqual(config.streams, {
      keepAlive: 15_000,
      retry: 2_000,
      replayEvents: 1000,
      replayTtl: 600_000,
      replayBytes: 1024 * 1024,
      replayBytesPerUser: 8 * 1024 * 1024,
      maxOpen: 20_000,
      maxPerUser: 200,
      maxBufferedBytes: 16 * 1024 * 1024,
    });
    assert.deepEqual(config.shutdown, { drainTimeout: 20_000 });
    assert.equal(config.limits.maxBodyBytes, 4 * 1024 * 1024);
    assert.equal(config.limits.bodyTimeout, 30_000);
    assert.deepEqual(config.metrics, {}, '/metrics open on the main port by default');
    assert.equal(config.log.level, 'info');
    const backend = config.backends[0]!;
    assert.equal(backend.transport, 'streamable-http');
    assert.equal(backend.timeout, 60_000);
    assert.deepEqual(backend.headers, {});
    assert.deepEqual(backend.args, []);
    assert.deepEqual(backend.env, {});
    assert.deepEqual(backend.access, { scopes: [], tenants: [], claims: {}, tools: { allow: [], deny: [] } });
    assert.equal(backend.upstreamAuth, undefined);
  });

  test('redis.keyPrefix defaults to "sb:"', () => {
    assert.deepEqual(parseConfig(minimal({ redis: { url: 'rediss://cache:6380/1' } })).redis, { mode: 'standalone', url: 'rediss://cache:6380/1', keyPrefix: 'sb:', unavailableWait: 5_000 });
  });

  test('durations: "24h", "60s", "500ms", "5m", "1d", "1.5s" and bare numbers (seconds) become milliseconds', () => {
    const config = parseConfig(
      minimal({
        sessions: { idleTtl: '24h' },
        streams: { keepAlive: 30, retry: '500ms', replayTtl: '5m' },
        auth: { issuer: 'https://idp.example.com', audience: 'aud', clockTolerance: '1.5s' },
        backends: [
          { name: 'a', url: 'http://a.example/mcp', timeout: '60s' },
          { name: 'b', url: 'http://b.example/mcp', timeout: '1d' },
          { name: 'c', url: 'http://c.example/mcp', timeout: 30 },
        ],
      }),
    );
    assert.equal(config.sessions.idleTtl, 86_400_000);
    assert.equal(config.streams.keepAlive, 30_000);
    assert.equal(config.streams.retry, 500);
    assert.equal(config.streams.replayTtl, 300_000);
    assert.equal(config.auth.clockTolerance, 1_500);
    assert.deepEqual(
      config.backends.map((b) => b.timeout),
      [60_000, 86_400_000, 30_000],
    );
    assert.equal(parseDuration('24h'), 86_400_000);
    assert.equal(parseDuration(' 60s '), 60_000);
    assert.equal(parseDuration(30), 30_000);
    // Whole ms for a bare number too: durations become Redis TTLs, which take no fractions (issue 45 §2).
    assert.equal(parseDuration(1.0001), 1_000);
    assert.equal(parseDuration(0.0025), 3);
    assert.equal(parseDuration('forever'), undefined);
    assert.equal(parseDuration(-1), undefined);
  });

  test('a malformed duration is an error naming the key', () => {
    assertConfigError(() => parseConfig(minimal({ sessions: { idleTtl: 'one day' } })), 'sessions.idleTtl', /one day/);
    assertConfigError(
      () => parseConfig(minimal({ backends: [{ name: 'x', url: 'http://x.example/mcp', timeout: '10 parsecs' }] })),
      'backends[0].timeout',
      /not a duration/,
    );
  });

  test('publicUrl and issuer lose trailing slashes; allowedOrigins become origins', () => {
    const config = parseConfig(
      minimal({
        publicUrl: 'https://mcp.example.com/',
        auth: { issuer: 'https://idp.example.com/realms/acme/', audience: 'https://mcp.example.com/mcp' },
        allowedOrigins: ['https://claude.ai/', 'https://app.example.com:8443/some/path'],
      }),
    );
    assert.equal(config.publicUrl, 'https://mcp.example.com');
    assert.equal(config.auth.issuer, 'https://idp.example.com/realms/acme');
    assert.deepEqual(config.allowedOrigins, ['https://claude.ai', 'https://app.example.com:8443']);
  });
});

describe('parseConfig: ${VAR} interpolation', () => {
  test('a missing variable is an error naming the key path and the variable', () => {
    const raw = minimal({ secrets: { cookieKey: '${COOKIE_KEY}' } });
    const err = assertConfigError(() => parseConfig(raw, {}), 'secrets.cookieKey', /COOKIE_KEY/);
    assert.match(err.message, /not set/);
  });

  test('a missing variable inside a list names the index', () => {
    const raw = minimal({ backends: [{ name: 'demo', url: 'http://x.example/mcp' }, { name: 'gh', url: 'http://y.example/mcp', headers: { 'X-Team': 'team-${TEAM}' } }] });
    assertConfigError(() => parseConfig(raw, {}), 'backends[1].headers.X-Team', /TEAM/);
  });

  test('variables are replaced anywhere inside a string, several per string', () => {
    const config = parseConfig(
      minimal({ publicUrl: 'https://${HOST}:${PORT}', backends: [{ name: 'demo', url: 'http://${HOST}/mcp', headers: { 'X-A': '${A}-${B}' } }] }),
      { HOST: 'gw.example.com', PORT: '8443', A: 'one', B: 'two' },
    );
    assert.equal(config.publicUrl, 'https://gw.example.com:8443');
    assert.equal(config.backends[0]!.url, 'http://gw.example.com/mcp');
    assert.equal(config.backends[0]!.headers['X-A'], 'one-two');
  });

  test('$${X} stays a literal ${X}, whether or not X is set', () => {
    const raw = minimal({ backends: [{ name: 'demo', url: 'http://x.example/mcp', headers: { 'X-Literal': '$${TEAM}', 'X-Unset': 'a$${NOPE}b', 'X-Mixed': '$${TEAM}/${TEAM}' } }] });
    const config = parseConfig(raw, { TEAM: 'platform' });
    assert.deepEqual(config.backends[0]!.headers, { 'X-Literal': '${TEAM}', 'X-Unset': 'a${NOPE}b', 'X-Mixed': '${TEAM}/platform' });
  });

  test('a value is inserted as text: it is not interpolated again and cannot change the document', () => {
    const config = parseConfig(
      minimal({ backends: [{ name: 'demo', url: 'http://x.example/mcp', headers: { 'X-Team': '${TEAM}' } }] }),
      { TEAM: '${COOKIE_KEY}\nurl: http://evil.example\n- injected: true' },
    );
    assert.equal(config.backends[0]!.headers['X-Team'], '${COOKIE_KEY}\nurl: http://evil.example\n- injected: true');
    assert.equal(config.backends[0]!.url, 'http://x.example/mcp');
  });

  test('an empty variable is a value, not a missing one', () => {
    const config = parseConfig(minimal({ backends: [{ name: 'demo', url: 'http://x.example/mcp', headers: { 'X-Empty': '${EMPTY}' } }] }), { EMPTY: '' });
    assert.equal(config.backends[0]!.headers['X-Empty'], '');
  });

  test('a variable can supply a numeric setting (listen.port: ${PORT})', () => {
    // Operators write `port: ${PORT}` (Kubernetes, Compose). The placeholder is a YAML
    // string, so after interpolation the value must still be accepted as the number it names.
    const raw = parseYaml('publicUrl: https://mcp.example.com\nlisten:\n  port: ${PORT}\nauth:\n  issuer: https://idp.example.com\n  audience: aud\nbackends:\n  - name: demo\n    url: http://x.example/mcp\n');
    let config;
    try {
      config = parseConfig(raw, { PORT: '9090' });
    } catch (err) {
      assert.fail(`port: \${PORT} with PORT=9090 was rejected: ${(err as Error).message}`);
    }
    assert.equal(config.listen.port, 9090);
  });
});

describe('parseConfig: errors name the key and the problem', () => {
  test('bad backend name', () => {
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'GitHub_Tools', url: 'http://x.example/mcp' }] })), 'backends[0].name', /\[a-z0-9-\]\+/);
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'ok', url: 'http://x.example/mcp' }, { name: 'has space', url: 'http://y.example/mcp' }] })), 'backends[1].name');
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: '', url: 'http://x.example/mcp' }] })), 'backends[0].name');
  });

  test('duplicate backend names', () => {
    const raw = minimal({
      backends: [
        { name: 'github', url: 'http://a.example/mcp' },
        { name: 'jira', url: 'http://b.example/mcp' },
        { name: 'github', url: 'http://c.example/mcp' },
      ],
    });
    assertConfigError(() => parseConfig(raw), 'backends[2].name', /duplicate backend name "github"/);
  });

  test('missing url (and missing command for stdio)', () => {
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'demo' }] })), 'backends[0].url', /required/);
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'demo', transport: 'sse' }] })), 'backends[0].url', /required/);
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'local', transport: 'stdio' }] })), 'backends[0].command', /required/);
    // stdio needs no url
    assert.equal(parseConfig(minimal({ backends: [{ name: 'local', transport: 'stdio', command: 'node', args: ['server.js'] }] })).backends[0]!.command, 'node');
  });

  test('no backends at all', () => {
    assertConfigError(() => parseConfig(minimal({ backends: [] })), 'backends', /at least one backend/);
  });

  test('bad publicUrl', () => {
    assertConfigError(() => parseConfig(minimal({ publicUrl: 'not a url' })), 'publicUrl');
    assertConfigError(() => parseConfig(minimal({ publicUrl: 'ftp://mcp.example.com' })), 'publicUrl', /http/);
    const raw = minimal();
    delete raw.publicUrl;
    assertConfigError(() => parseConfig(raw), 'publicUrl', /Required/i);
  });

  test('text that is not a URL at all is a ConfigError naming the key (backend url, issuer), not a crash', () => {
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'demo', url: 'api.example.com/mcp' }] })), 'backends[0].url');
    assertConfigError(() => parseConfig(minimal({ auth: { issuer: 'idp.example.com', audience: 'aud' } })), 'auth.issuer');
  });

  test('bad backend url and bad redis url', () => {
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'demo', url: 'file:///etc/passwd' }] })), 'backends[0].url', /http/);
    assertConfigError(() => parseConfig(minimal({ redis: { url: 'http://redis:6379' } })), 'redis.url', /redis:\/\//);
  });

  test('unknown keys are refused (strict), naming where they are and what they are', () => {
    assertConfigError(() => parseConfig(minimal({ publicURL: 'https://typo.example' })), '', /publicURL/);
    assertConfigError(() => parseConfig(minimal({ auth: { issuer: 'https://idp.example.com', audience: 'aud', audiance: 'typo' } })), 'auth', /audiance/);
    assertConfigError(() => parseConfig(minimal({ backends: [{ name: 'demo', url: 'http://x.example/mcp', timout: '5s' }] })), 'backends[0]', /timout/);
    assertConfigError(() => parseConfig(minimal({ sessions: { idleTTL: '1h' } })), 'sessions', /idleTTL/);
  });

  test('short cookieKey / tokenKey', () => {
    assertConfigError(() => parseConfig(minimal({ secrets: { cookieKey: 'x'.repeat(31) } })), 'secrets.cookieKey', /32/);
    assertConfigError(() => parseConfig(minimal({ secrets: { tokenKey: 'too-short' } })), 'secrets.tokenKey', /32/);
    // via interpolation, too
    assertConfigError(() => parseConfig(minimal({ secrets: { cookieKey: '${COOKIE_KEY}' } }), { COOKIE_KEY: 'short' }), 'secrets.cookieKey', /32/);
    assert.equal(parseConfig(minimal({ secrets: { cookieKey: 'k'.repeat(32) } })).secrets.cookieKey, 'k'.repeat(32));
  });

  test('unsupported algorithm, bad port, bad log level', () => {
    assertConfigError(() => parseConfig(minimal({ auth: { issuer: 'https://idp.example.com', audience: 'aud', algorithms: ['HS256'] } })), 'auth.algorithms[0]');
    assertConfigError(() => parseConfig(minimal({ listen: { port: 70_000 } })), 'listen.port');
    assertConfigError(() => parseConfig(minimal({ log: { level: 'chatty' } })), 'log.level');
  });

  test('input and output bounds and /metrics access (issue 13) are checked, naming the key', () => {
    assertConfigError(() => parseConfig(minimal({ limits: { bodyTimeout: '500ms' } })), 'limits.bodyTimeout', /at least 1s/);
    // Store TTLs: Redis refuses a TTL of 0 (state/ttl.ts); the config says so before anything runs.
    assertConfigError(() => parseConfig(minimal({ sessions: { idleTtl: 0 } })), 'sessions.idleTtl', /at least 1s/);
    assertConfigError(() => parseConfig(minimal({ streams: { replayTtl: '0s' } })), 'streams.replayTtl', /at least 1s/);
    assertConfigError(() => parseConfig(minimal({ aggregate: { rejoinInterval: 0 } })), 'aggregate.rejoinInterval', /at least 100ms/);
    assertConfigError(() => parseConfig(minimal({ streams: { maxBufferedBytes: 1024 } })), 'streams.maxBufferedBytes', /65536/);
    assertConfigError(() => parseConfig(minimal({ metrics: { bearerToken: 'short' } })), 'metrics.bearerToken', /16/);
    assertConfigError(() => parseConfig(minimal({ metrics: { listen: { port: 70_000 } } })), 'metrics.listen.port');
    assertConfigError(() => parseConfig(minimal({ listen: { port: 9000 }, metrics: { listen: { port: 9000 } } })), 'metrics.listen.port', /differ from listen\.port/);
    const config = parseConfig(minimal({ limits: { bodyTimeout: '2m' }, streams: { maxBufferedBytes: '1048576' }, metrics: { listen: { port: 9464 }, bearerToken: '${TOKEN}' } }), { TOKEN: 't'.repeat(20) });
    assert.equal(config.limits.bodyTimeout, 120_000);
    assert.equal(config.streams.maxBufferedBytes, 1024 * 1024);
    assert.deepEqual(config.metrics, { listen: { host: '0.0.0.0', port: 9464 }, bearerToken: 't'.repeat(20) });
  });

  test('a non-object document is an error at the root', () => {
    assertConfigError(() => parseConfig(null), '');
    assertConfigError(() => parseConfig(['a', 'list']), '');
  });

  test('formatKey renders paths the way the YAML reads', () => {
    assert.equal(formatKey(['backends', 0, 'upstreamAuth', 'clientId']), 'backends[0].upstreamAuth.clientId');
    assert.equal(formatKey(['backends', '2', 'name']), 'backends[2].name');
    assert.equal(formatKey([]), '');
  });
});

describe('findConfigFile', () => {
  test('--config <file> wins over everything', () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'switchboard.yaml'), 'x: 1');
    assert.equal(findConfigFile(['node', 'cli', '--config', 'custom.yaml'], { SWITCHBOARD_CONFIG: '/etc/env.yaml' }, cwd), join(cwd, 'custom.yaml'));
    assert.equal(findConfigFile(['--config', '/abs/path.yaml'], {}, cwd), '/abs/path.yaml');
  });

  test('--config=<file> comes next', () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'switchboard.yaml'), 'x: 1');
    assert.equal(findConfigFile(['--config=conf/sb.yaml'], { SWITCHBOARD_CONFIG: '/etc/env.yaml' }, cwd), join(cwd, 'conf/sb.yaml'));
  });

  test('--config without a file is an error', () => {
    assert.throws(() => findConfigFile(['--config'], {}, tempDir()), (err: unknown) => err instanceof ConfigError && /--config/.test(err.message));
  });

  test('$SWITCHBOARD_CONFIG when there is no flag', () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'switchboard.yaml'), 'x: 1');
    assert.equal(findConfigFile([], { SWITCHBOARD_CONFIG: 'from-env.yaml' }, cwd), join(cwd, 'from-env.yaml'));
    assert.equal(findConfigFile([], { SWITCHBOARD_CONFIG: '/etc/switchboard/config.yaml' }, cwd), '/etc/switchboard/config.yaml');
  });

  test('./switchboard.yaml when it exists', () => {
    const cwd = tempDir();
    assert.equal(findConfigFile([], {}, cwd), undefined, 'not there yet');
    writeFileSync(join(cwd, 'switchboard.yaml'), 'x: 1');
    assert.equal(findConfigFile([], {}, cwd), join(cwd, 'switchboard.yaml'));
  });

  test('./switchboard.yaml is looked up in the process cwd by default', (t) => {
    const cwd = tempDir();
    const before = process.cwd();
    process.chdir(cwd);
    t.after(() => process.chdir(before));
    assert.equal(findConfigFile([], {}), undefined);
    writeFileSync(join(cwd, 'switchboard.yaml'), 'x: 1');
    assert.equal(findConfigFile([], {}), join(cwd, 'switchboard.yaml'));
  });

  test('none of them → undefined (the embedded development default)', () => {
    const cwd = tempDir();
    mkdirSync(join(cwd, 'switchboard.yaml.d'));
    assert.equal(findConfigFile(['node', 'cli', '--verbose'], {}, cwd), undefined);
    assert.equal(findConfigFile([], { SWITCHBOARD_CONFIG: '' }, cwd), undefined, 'an empty SWITCHBOARD_CONFIG counts as unset');
  });
});

describe('loadConfigFile', () => {
  test('reads, interpolates and validates a YAML file', () => {
    const dir = tempDir();
    const file = join(dir, 'sb.yaml');
    writeFileSync(
      file,
      [
        'publicUrl: https://gw.example.com/',
        'auth:',
        '  issuer: ${ISSUER}',
        '  audience: https://gw.example.com/mcp',
        'secrets:',
        '  cookieKey: "${COOKIE_KEY}"',
        'sessions: { idleTtl: 90m }',
        'backends:',
        '  - name: everything',
        '    url: http://127.0.0.1:3001/mcp',
        '    timeout: 2m',
        '',
      ].join('\n'),
    );
    const config = loadConfigFile(file, { ISSUER: 'https://idp.example.com/', COOKIE_KEY: 'z'.repeat(40) });
    assert.equal(config.publicUrl, 'https://gw.example.com');
    assert.equal(config.auth.issuer, 'https://idp.example.com');
    assert.equal(config.secrets.cookieKey, 'z'.repeat(40));
    assert.equal(config.sessions.idleTtl, 90 * 60_000);
    assert.equal(config.backends[0]!.timeout, 120_000);
  });

  test('invalid YAML → an error that names the file', () => {
    const dir = tempDir();
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, 'publicUrl: https://x.example\nbackends: [unclosed\n  - name: {\n');
    assert.throws(
      () => loadConfigFile(file, {}),
      (err: unknown) => err instanceof ConfigError && err.message.includes(file) && /not valid YAML/.test(err.message),
    );
  });

  test('a missing file → an error that names the file', () => {
    const file = join(tempDir(), 'nope.yaml');
    assert.throws(
      () => loadConfigFile(file, {}),
      (err: unknown) => err instanceof ConfigError && err.message.includes(file) && /cannot read/.test(err.message),
    );
  });

  test('valid YAML with a bad value → an error that names the key', () => {
    const dir = tempDir();
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'publicUrl: https://x.example\nauth: { issuer: https://idp.example.com, audience: aud }\nbackends:\n  - name: Bad_Name\n    url: http://x.example/mcp\n');
    assertConfigError(() => loadConfigFile(file, {}), 'backends[0].name');
  });

  test('a missing variable in a file names the key', () => {
    const dir = tempDir();
    const file = join(dir, 'vars.yaml');
    writeFileSync(file, 'publicUrl: https://x.example\nauth: { issuer: https://idp.example.com, audience: aud }\nsecrets:\n  cookieKey: ${COOKIE_KEY}\nbackends:\n  - name: a\n    url: http://x.example/mcp\n');
    assertConfigError(() => loadConfigFile(file, {}), 'secrets.cookieKey', /COOKIE_KEY/);
  });
});

describe('parseConfig: account linking needs sign-in and shared secrets', () => {
  const upstream = { provider: 'acme', authorizationUrl: 'https://acme.example/authorize', tokenUrl: 'https://acme.example/token', clientId: 'switchboard' };
  const linked = (extra: Record<string, unknown> = {}) => {
    const base = minimal(extra);
    return { ...base, backends: [{ name: 'linked', url: 'https://backend.example/mcp', upstreamAuth: upstream }] };
  };
  const login = { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp', login: { clientId: 'switchboard-web' } };

  test('upstreamAuth without auth.login is refused, naming auth.login', () => {
    assertConfigError(() => parseConfig(linked()), 'auth.login', /upstreamAuth/);
  });

  test('upstreamAuth endpoints are required unless discover is true', () => {
    const base = linked({ auth: login });
    assertConfigError(() => parseConfig({ ...base, backends: [{ name: 'linked', url: 'https://backend.example/mcp', upstreamAuth: { provider: 'acme' } }] }), 'backends[0].upstreamAuth.authorizationUrl', /discover/);
    assert.equal(parseConfig({ ...base, backends: [{ name: 'linked', url: 'https://backend.example/mcp', upstreamAuth: { provider: 'acme', discover: true } }] }).backends[0]!.upstreamAuth!.discover, true);
  });

  const withUpstream = (u: Record<string, unknown>) => ({ ...linked({ auth: login }), backends: [{ name: 'linked', url: 'https://backend.example/mcp', upstreamAuth: u }] });

  test('a preset supplies the endpoints; clientId is still required; without a preset the message says so', () => {
    const github = parseConfig(withUpstream({ provider: 'github', preset: 'github', clientId: 'gh', clientSecret: 's' })).backends[0]!.upstreamAuth!;
    assert.equal(github.preset, 'github');
    assert.equal(github.authorizationUrl, undefined, 'filled later from the preset, not copied into config');
    assertConfigError(() => parseConfig(withUpstream({ provider: 'github', preset: 'github' })), 'backends[0].upstreamAuth.clientId', /required/);
    assertConfigError(() => parseConfig(withUpstream({ provider: 'acme', clientId: 'x' })), 'backends[0].upstreamAuth.authorizationUrl', /preset/);
    assertConfigError(() => parseConfig(withUpstream({ provider: 'gitlab', preset: 'gitlab', clientId: 'x' })), 'backends[0].upstreamAuth.preset', /github/);
    assertConfigError(() => parseConfig(withUpstream({ provider: 'github', preset: 'github', discover: true })), 'backends[0].upstreamAuth.preset', /discover/);
  });

  test('shareCatalog takes tools and prompts only: resources, templates and instructions are users\' data; catalog declares tools and prompts', () => {
    const shared = parseConfig(withUpstream({ ...upstream, shareCatalog: ['tools', 'prompts'] })).backends[0]!.upstreamAuth!;
    assert.deepEqual(shared.shareCatalog, ['tools', 'prompts']);
    assert.deepEqual(parseConfig(withUpstream(upstream)).backends[0]!.upstreamAuth!.shareCatalog, [], 'nothing is shared unless the operator says so');
    assertConfigError(() => parseConfig(withUpstream({ ...upstream, shareCatalog: ['tools', 'resources'] })), 'backends[0].upstreamAuth.shareCatalog[1]', /never shared/);
    assertConfigError(() => parseConfig(withUpstream({ ...upstream, shareCatalog: ['instructions'] })), 'backends[0].upstreamAuth.shareCatalog[0]', /never shared/);
    assertConfigError(() => parseConfig(withUpstream({ ...upstream, shareCatalog: ['tool'] })), 'backends[0].upstreamAuth.shareCatalog[0]', /tools, prompts/);
    const declared = parseConfig(withUpstream({ ...upstream, catalog: { tools: [{ name: 'search', description: 'Searches' }], prompts: [{ name: 'summary' }] } })).backends[0]!.upstreamAuth!.catalog!;
    assert.deepEqual(declared.tools, [{ name: 'search', description: 'Searches', inputSchema: { type: 'object' } }], 'an inputSchema is always there, as tools/list must give one');
    assert.deepEqual(declared.prompts, [{ name: 'summary' }]);
    assertConfigError(() => parseConfig(withUpstream({ ...upstream, catalog: { resources: [] } })), 'backends[0].upstreamAuth.catalog', /resources/);
    assertConfigError(() => parseConfig(withUpstream({ ...upstream, catalog: { tools: [{ description: 'no name' }] } })), 'backends[0].upstreamAuth.catalog.tools[0].name', /Required/);
  });

  test('microsoft: tenant only there and only a path segment; resource refused; an API scope required', () => {
    const entra = (u: Record<string, unknown>) => withUpstream({ provider: 'entra', clientId: 'x', ...u });
    const ok = parseConfig(entra({ preset: 'microsoft', tenant: '72f988bf-86f1-41af-91ab-2d7cd011db47', scopes: ['api://app/.default'] }));
    assert.equal(ok.backends[0]!.upstreamAuth!.tenant, '72f988bf-86f1-41af-91ab-2d7cd011db47');
    assertConfigError(() => parseConfig(entra({ preset: 'github', tenant: 'contoso.com' })), 'backends[0].upstreamAuth.tenant', /microsoft/);
    assertConfigError(() => parseConfig(entra({ preset: 'microsoft', tenant: 'x/../evil', scopes: ['User.Read'] })), 'backends[0].upstreamAuth.tenant', /tenant id/);
    assertConfigError(() => parseConfig(entra({ preset: 'microsoft', scopes: ['User.Read'], resource: 'https://mcp.example.com/mcp' })), 'backends[0].upstreamAuth.resource', /api:\/\/<app-id>\/\.default/);
    assertConfigError(() => parseConfig(entra({ preset: 'microsoft', scopes: ['offline_access'] })), 'backends[0].upstreamAuth.scopes', /preset microsoft/);
  });

  test('with redis, sign-in needs secrets.cookieKey and secrets.tokenKey (replicas share them)', () => {
    assertConfigError(() => parseConfig(linked({ auth: login, redis: { url: 'redis://redis:6379/0' } })), 'secrets.cookieKey', /redis/);
    const ok = parseConfig(linked({ auth: login, redis: { url: 'redis://redis:6379/0' }, secrets: { cookieKey: 'c'.repeat(32), tokenKey: 't'.repeat(32) } }));
    assert.equal(ok.backends[0]!.upstreamAuth!.provider, 'acme');
    // One replica without redis may run on random per-process keys.
    assert.equal(parseConfig(linked({ auth: login })).secrets.cookieKey, undefined);
  });
});
