/**
 * `switchboard validate`, `--version` and `--help` (issue 32 §2), run as the real CLI in a
 * child process. validate must give the start's own verdict: exit 0 with a summary, or exit
 * 1 with exactly the message the start prints; `${VAR}` is resolved against the environment
 * the command is given; and it must start nothing — it runs under a preload that ends the
 * process on any connection, listener or DNS lookup, with a Redis URL and backends that
 * nothing listens on, and under a deadline.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { before, describe, test } from 'node:test';
import { nodeEntry } from '../helpers/node-entry.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NO_NETWORK = fileURLToPath(new URL('../fixtures/no-network.mjs', import.meta.url));
/** Validation alone takes well under this; a command that waited on a socket would not end. */
const DEADLINE_MS = 30_000;

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs src/cli.ts with `args`, only `env` as its environment, networking refused. */
function cli(args: string[], env: Record<string, string> = {}, cwd = tmp): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', NO_NETWORK, ...nodeEntry(join(ROOT, 'src/cli.ts')), ...args],
      { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout: DEADLINE_MS, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stdout, stderr }),
    );
  });
}

/** A production-shaped config: Redis and backends on ports nothing listens on, secrets from `${VAR}`. */
const CONFIG = `publicUrl: https://mcp.example.com
listen: { port: "\${PORT}" }
redis:
  url: "\${REDIS_URL}"
auth:
  issuer: https://idp.example.com/realms/acme
  audience: https://mcp.example.com/mcp
  login: { clientId: switchboard, clientSecret: "\${LOGIN_SECRET}" }
secrets:
  cookieKey: "\${COOKIE_KEY}"
  tokenKey: "\${TOKEN_KEY}"
backends:
  - name: docs
    url: http://127.0.0.1:1/mcp
  - name: tickets
    url: http://unreachable.invalid:8080/mcp
`;
const ENV = {
  PORT: '9090',
  REDIS_URL: 'redis://:hunter2-redis-password@127.0.0.1:1/0',
  LOGIN_SECRET: 'login-secret-value',
  COOKIE_KEY: 'c'.repeat(40),
  TOKEN_KEY: 't'.repeat(40),
};

let tmp: string;
let file: string;
before(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'sb-validate-'));
  file = join(tmp, 'switchboard.yaml');
  await writeFile(file, CONFIG);
});

describe('switchboard validate', () => {
  test('a valid file: exit 0, an OK summary without secrets, no connection attempted', async () => {
    const out = await cli(['validate', '--config', file], ENV);
    assert.equal(out.stderr, '');
    assert.equal(out.code, 0);
    assert.match(out.stdout, /switchboard\.yaml: OK\n/);
    assert.match(out.stdout, /listen: 0\.0\.0\.0:9090\n/, 'the port came from ${PORT}');
    assert.match(out.stdout, /state: redis \(standalone\)/);
    assert.match(out.stdout, /backends \(2\): docs \(streamable-http\), tickets \(streamable-http\)/);
    for (const secret of ['hunter2', 'login-secret-value', 'c'.repeat(40), 't'.repeat(40)]) assert.ok(!out.stdout.includes(secret), `printed ${secret}`);
  });

  test('the no-network preload does refuse a connection (so the test above proves something)', async () => {
    const out = await cli(['--config', file], ENV);
    assert.equal(out.code, 70, out.stderr);
    assert.match(out.stderr, /no-network preload: a (connection|listener|DNS lookup) attempted/);
  });

  test('a missing ${VAR}: exit 1 with the message the start prints, naming the key and the variable', async () => {
    const { LOGIN_SECRET: _left, ...env } = ENV;
    const validate = await cli(['validate', '--config', file], env);
    const start = await cli(['--config', file], env);
    assert.equal(validate.code, 1);
    assert.equal(validate.stdout, '');
    assert.equal(validate.stderr, 'switchboard: config: auth.login.clientSecret: environment variable LOGIN_SECRET is not set\n');
    assert.equal(start.code, 1, start.stderr);
    assert.equal(validate.stderr, start.stderr);
  });

  test('an invalid value and a cross-key rule: exit 1 with the start\'s message', async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['bad-port.yaml', CONFIG.replace('"${PORT}"', '"http"'), /^switchboard: config: listen\.port: /],
      ['no-secrets.yaml', CONFIG.replace(/secrets:\n.*\n.*\n/, ''), /^switchboard: config: secrets\.cookieKey: is required with redis/],
      ['typo.yaml', `${CONFIG}logg: { level: debug }\n`, /^switchboard: config: \(root\): Unrecognized key\(s\) in object: 'logg'\n$/],
      ['not-yaml.yaml', 'backends: [', /is not valid YAML/],
    ];
    for (const [name, text, message] of cases) {
      const path = join(tmp, name);
      await writeFile(path, text);
      const validate = await cli(['validate', '--config', path], ENV);
      const start = await cli(['--config', path], ENV);
      assert.equal(validate.code, 1, name);
      assert.match(validate.stderr, message, name);
      assert.equal(validate.stderr, start.stderr, `${name}: validate and the start agree`);
    }
  });

  test('no file at all: exit 1 saying how to name one (validate never falls back to the development default)', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'sb-validate-empty-'));
    const out = await cli(['validate'], {}, empty);
    assert.equal(out.code, 1);
    assert.match(out.stderr, /validate needs a config file: --config <file\.yaml>/);
  });
});

describe('switchboard --version and --help', () => {
  test('--version prints the version in package.json', async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const out = await cli(['--version']);
    assert.equal(out.code, 0);
    assert.equal(out.stdout, `${pkg.version}\n`);
  });

  test('the version is found from the build output too: dist/ mirrors src/ (tsconfig.build.json)', async () => {
    // src/ops/version.ts reads ../../package.json; built, it is dist/ops/version.js, as deep.
    const build = JSON.parse(await readFile(join(ROOT, 'tsconfig.build.json'), 'utf8')) as { compilerOptions: { rootDir: string; outDir: string } };
    assert.deepEqual([build.compilerOptions.rootDir, build.compilerOptions.outDir], ['src', 'dist']);
    const built = new URL('../../package.json', pathToFileURL(join(ROOT, build.compilerOptions.outDir, 'ops/version.js')));
    assert.equal(fileURLToPath(built), join(ROOT, 'package.json'));
  });

  test('--help lists validate and --version', async () => {
    const out = await cli(['--help']);
    assert.equal(out.code, 0);
    assert.match(out.stdout, /switchboard validate \[--config <file\.yaml>\]/);
    assert.match(out.stdout, /switchboard --version/);
  });
});
