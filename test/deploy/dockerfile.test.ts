/**
 * The container image recipe (SPEC §6): multi-stage, production dependencies only,
 * non-root, exec-form start, health check, and a build context that contains what the
 * Dockerfile copies. There is no Docker engine on the build machine, so the Dockerfile is
 * parsed and checked against the repository (and its HEALTHCHECK command is run for real
 * against a running gateway).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parseConfig } from '../../src/config/load.js';
import { startServer } from '../../src/server.js';
import { freePort } from '../helpers/free-port.js';
import { ROOT, dockerignoreMatcher, execForm, parseCopy, parseDockerfile, readRepoFile, type Stage } from './support.js';

const run = promisify(execFile);
const dockerfile = parseDockerfile(readRepoFile('Dockerfile'));
const final = dockerfile.stages.at(-1)!;
const pkg = JSON.parse(readRepoFile('package.json')) as { version: string; dependencies: Record<string, string>; devDependencies: Record<string, string> };

function instructions(stage: Stage, keyword: string) {
  return stage.instructions.filter((i) => i.keyword === keyword);
}

function stageNamed(name: string): Stage {
  const stage = dockerfile.stages.find((s) => s.name === name);
  assert.ok(stage, `no stage named ${name}`);
  return stage;
}

/** The npm commands a stage runs. */
function npmCommands(stage: Stage): string[] {
  return instructions(stage, 'RUN').flatMap((r) => r.args.split(/&&|;/).map((c) => c.trim()).filter((c) => /\bnpm\s+(ci|install|i)\b/.test(c)));
}

describe('Dockerfile', () => {
  test('has named build and runtime stages', () => {
    assert.ok(dockerfile.stages.length >= 2, `expected ≥ 2 stages, found ${dockerfile.stages.length}`);
    for (const stage of dockerfile.stages) assert.ok(stage.name, `stage FROM ${stage.image} has no name`);
  });

  test('every base image pins the Node major version (22) and no stage uses :latest', () => {
    for (const stage of dockerfile.stages) {
      const [repository, tag = ''] = stage.image.split('@')[0]!.split(/:(?=[^/]*$)/);
      assert.ok(tag !== '' && tag !== 'latest', `${stage.image}: tag must be pinned`);
      const pinned = /^22(\D|$)/.test(tag) || /(^|\/)nodejs22-/.test(repository!);
      assert.ok(pinned, `${stage.image}: Node major 22 is not pinned in the image reference`);
    }
  });

  test('the final stage runs as a numeric non-root user', () => {
    const users = instructions(final, 'USER');
    assert.ok(users.length > 0, 'final stage has no USER');
    const user = users.at(-1)!.args;
    const match = /^(\d+)(?::(\d+))?$/.exec(user);
    assert.ok(match, `USER ${user} must be numeric uid[:gid] (Kubernetes runAsNonRoot cannot verify names)`);
    assert.notEqual(Number(match[1]), 0, 'USER must not be root');
    if (match[2] !== undefined) assert.notEqual(Number(match[2]), 0, 'group must not be root');
  });

  test('the final stage installs nothing and takes node_modules from a production-only install', () => {
    assert.deepEqual(npmCommands(final), [], 'no npm in the final stage');
    assert.equal(instructions(final, 'RUN').length, 0, 'the final (distroless) stage cannot RUN anything');
    const copies = instructions(final, 'COPY').map((c) => parseCopy(c.args));
    const modules = copies.filter((c) => c.sources.some((s) => /(^|\/)node_modules\/?$/.test(s)));
    assert.equal(modules.length, 1, 'exactly one COPY brings node_modules');
    const from = modules[0]!.from;
    assert.ok(from, 'node_modules come from another stage');
    const deps = stageNamed(from);
    const commands = npmCommands(deps);
    assert.ok(commands.length > 0, `stage ${from} runs no npm install`);
    for (const command of commands) {
      assert.match(command, /\bnpm ci\b/, `${command}: use npm ci (lockfile)`);
      assert.match(command, /--omit=dev\b/, `${command}: devDependencies must be omitted`);
      assert.match(command, /--ignore-scripts\b/, `${command}: no install scripts are needed at runtime`);
    }
  });

  test('only dist/ comes from the stage that has devDependencies', () => {
    const build = dockerfile.stages.find((s) => npmCommands(s).some((c) => !/--omit=dev/.test(c)));
    assert.ok(build?.name, 'there is a build stage with devDependencies');
    const fromBuild = instructions(final, 'COPY')
      .map((c) => parseCopy(c.args))
      .filter((c) => c.from === build.name);
    assert.deepEqual(fromBuild.flatMap((c) => c.sources).map((s) => s.replace(/\/$/, '').split('/').at(-1)), ['dist']);
  });

  test('the runtime image has dist/, openapi/, node_modules/ and package.json ("type": "module") under its WORKDIR', () => {
    const workdir = instructions(final, 'WORKDIR').at(-1)?.args;
    assert.equal(workdir, '/app');
    const destinations = instructions(final, 'COPY').map((c) => parseCopy(c.args)).map((c) => ({ src: c.sources.join(' '), dest: c.destination }));
    const has = (src: RegExp, dest: RegExp) => destinations.some((d) => src.test(d.src) && dest.test(d.dest));
    assert.ok(has(/(^|\/)dist\/?$/, /^(\.\/)?dist\/?$/), 'dist → ./dist');
    assert.ok(has(/^openapi\/?$/, /^(\.\/)?openapi\/?$/), 'openapi → ./openapi (read at runtime as ../../openapi from dist/ops/)');
    assert.ok(has(/node_modules\/?$/, /^(\.\/)?node_modules\/?$/), 'node_modules → ./node_modules');
    assert.ok(has(/^package\.json$/, /^\.\/?$/), 'package.json → ./');
    for (const copy of instructions(final, 'COPY').map((c) => parseCopy(c.args))) {
      assert.equal(copy.chown, '0:0', `COPY ${copy.sources.join(' ')}: files are root-owned, not writable by the runtime user`);
    }
  });

  test('exec-form ENTRYPOINT and CMD start dist/cli.js with the mounted config file', () => {
    const entrypoint = execForm(instructions(final, 'ENTRYPOINT').at(-1)?.args ?? '');
    const cmd = execForm(instructions(final, 'CMD').at(-1)?.args ?? '');
    assert.ok(entrypoint, 'ENTRYPOINT must be exec form (JSON array) so node receives SIGTERM');
    assert.ok(cmd, 'CMD must be exec form');
    assert.match(entrypoint[0]!, /(^|\/)node$/);
    assert.deepEqual(cmd, ['dist/cli.js', '--config', '/etc/switchboard/switchboard.yaml']);
    // dist/cli.js is what tsconfig.build.json makes of src/cli.ts.
    const build = JSON.parse(readRepoFile('tsconfig.build.json')) as { compilerOptions: { rootDir: string; outDir: string } };
    assert.equal(build.compilerOptions.rootDir, 'src');
    assert.equal(build.compilerOptions.outDir, 'dist');
    assert.ok(existsSync(join(ROOT, 'src/cli.ts')));
  });

  test('NODE_ENV=production, EXPOSE 8080, OCI labels', () => {
    assert.ok(instructions(final, 'ENV').some((e) => /\bNODE_ENV=production\b/.test(e.args)));
    assert.ok(instructions(final, 'EXPOSE').some((e) => e.args.split(/\s+/).includes('8080')));
    const labels = instructions(final, 'LABEL').map((l) => l.args).join(' ');
    for (const key of ['title', 'description', 'source', 'version', 'revision', 'licenses', 'created']) {
      assert.match(labels, new RegExp(`org\\.opencontainers\\.image\\.${key}=`), `label org.opencontainers.image.${key}`);
    }
    assert.match(labels, /org\.opencontainers\.image\.licenses="Apache-2\.0"/);
    assert.equal(dockerfile.stages.flatMap((s) => instructions(s, 'ARG')).find((a) => a.args.startsWith('VERSION='))?.args, `VERSION=${pkg.version}`);
  });

  test('the build stage compiles with tsc from the lockfile install', () => {
    const build = dockerfile.stages[0]!;
    const runs = instructions(build, 'RUN').map((r) => r.args);
    assert.ok(runs.some((r) => /npm ci\b/.test(r) && !/--omit=dev/.test(r)), 'npm ci with devDependencies');
    const tsc = runs.find((r) => /tsc\b/.test(r));
    assert.ok(tsc, 'runs tsc');
    assert.match(tsc, /-p tsconfig\.build\.json/);
    const script = /node (\S*tsc)\b/.exec(tsc)?.[1];
    assert.ok(script && existsSync(join(ROOT, script)), `${script} exists after npm ci`);
  });

  test('HEALTHCHECK is exec form and calls /healthz with node', async () => {
    const healthchecks = instructions(final, 'HEALTHCHECK');
    assert.equal(healthchecks.length, 1);
    const command = execForm(healthchecks[0]!.args.replace(/^(--\S+\s+)*CMD\s+/, ''));
    assert.ok(command, 'HEALTHCHECK CMD must be exec form: the distroless image has no shell');
    assert.equal(command[0], execForm(instructions(final, 'ENTRYPOINT').at(-1)!.args)![0], 'runs the same node binary');
    assert.equal(command[1], '-e');
    assert.match(command[2]!, /http:\/\/127\.0\.0\.1:8080\/healthz/);
  });

  test('the HEALTHCHECK script exits 0 against a running gateway and 1 when nothing listens', async () => {
    const script = execForm(instructions(final, 'HEALTHCHECK')[0]!.args.replace(/^(--\S+\s+)*CMD\s+/, ''))![2]!;
    const port = await freePort();
    const config = parseConfig({
      publicUrl: `http://127.0.0.1:${port}`,
      listen: { host: '127.0.0.1', port },
      auth: { issuer: 'http://127.0.0.1:1/issuer', audience: `http://127.0.0.1:${port}/mcp`, jwksUri: 'http://127.0.0.1:1/jwks' },
      log: { level: 'silent' },
      backends: [{ name: 'demo', url: 'http://127.0.0.1:1/mcp' }],
    });
    const localScript = script.replace('127.0.0.1:8080', `127.0.0.1:${port}`);
    const server = await startServer(config);
    try {
      await run(process.execPath, ['-e', localScript], { timeout: 10_000 });
    } finally {
      await server.close();
    }
    await assert.rejects(run(process.execPath, ['-e', localScript], { timeout: 10_000 }), (err: { code?: number }) => err.code === 1);
  });
});

describe('.dockerignore', () => {
  const ignored = dockerignoreMatcher(readRepoFile('.dockerignore'));

  test('excludes dependencies, build output, VCS data, tests and local secrets', () => {
    for (const path of ['node_modules', 'node_modules/fastify/package.json', 'dist/cli.js', '.git', '.git/HEAD', 'test/deploy/dockerfile.test.ts', 'bench/run.ts', '.env', '.env.local', 'coverage/lcov.info', 'helm/switchboard/values.yaml', 'docs.md']) {
      assert.ok(ignored(path), `${path} should be excluded from the build context`);
    }
  });

  test('keeps every file the Dockerfile copies from the context', () => {
    const sources = dockerfile.stages
      .flatMap((s) => instructions(s, 'COPY'))
      .map((c) => parseCopy(c.args))
      .filter((c) => !c.from)
      .flatMap((c) => c.sources);
    assert.ok(sources.length > 0);
    for (const source of [...sources, 'src/cli.ts', 'src/config/load.ts', 'openapi/openapi.json', 'README.md']) {
      assert.ok(!ignored(source), `${source} is copied but excluded by .dockerignore`);
    }
  });

  test('the files the Dockerfile copies exist (openapi/ is checked separately)', () => {
    const sources = dockerfile.stages
      .flatMap((s) => instructions(s, 'COPY'))
      .map((c) => parseCopy(c.args))
      .filter((c) => !c.from)
      .flatMap((c) => c.sources)
      .filter((s) => s !== 'openapi');
    for (const source of sources) assert.ok(existsSync(join(ROOT, source)), `${source} does not exist`);
  });

  test('openapi/ exists for `COPY openapi`', { skip: existsSync(join(ROOT, 'openapi')) ? false : 'openapi/ is not in the repository yet; `docker build` needs it' }, () => {
    assert.ok(existsSync(join(ROOT, 'openapi')));
  });
});
