/**
 * scripts/group-tests.mjs (issue 43): which test files may share a process, how they are
 * packed, and — run for real in a child `node --test` — that in a group each file's tests and
 * `before`/`after` hooks stay its own and a failure is reported under the file's name.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
// @ts-expect-error: a plain .mjs script, no declarations
import { GROUP_FILES, GROUP_S, groupSource, ownProcessReason, planGroups, SHORT_S } from '../../scripts/group-tests.mjs';

interface Group {
  members: string[];
  seconds: number;
}
const plan = planGroups as (files: string[], secondsOf: (file: string) => number | undefined, sourceOf: (file: string) => string) => Array<string | Group>;
const reason = ownProcessReason as (source: string) => string | undefined;

/** This file's own runner tells its children to report to it (NODE_TEST_CONTEXT); the group's run must report as a run of its own. */
function withoutTestContext(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

test('a file that changes what the process shares keeps its own process', () => {
  for (const text of [
    'process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";',
    "process.env['X'] = '1';",
    'delete process.env.X;',
    'Object.assign(process.env, { A: "1" });',
    "process.on('exit', () => {});",
    'process.chdir(dir);',
    'process.exitCode = 1;',
    'setGlobalDispatcher(agent);',
    "mock.timers.enable({ apis: ['setTimeout'] });",
    'mock.method(globalThis, "fetch");',
    'console.warn = () => {};',
    'globalThis.fetch = fake;',
    "register('../fixtures/import-watch.mjs', import.meta.url, { data });",
    "module.register(hooks, import.meta.url);",
    '// test-isolation: own-process (it counts open handles)',
  ]) {
    assert.ok(reason(text), `refused: ${text}`);
  }
  for (const text of [
    'const url = process.env.SB_TEST_ISSUER;',
    "if (process.env.X === '1') {}",
    't.mock.method(object, "f");',
    "test('a', () => {});",
  ]) {
    assert.equal(reason(text), undefined, `allowed: ${text}`);
  }
});

test('short, known, shareable files are packed in order; long, new or refused ones run alone', () => {
  const seconds: Record<string, number> = { 'long.js': SHORT_S + 1, 'env.js': 1 };
  const files = ['long.js', ...Array.from({ length: GROUP_FILES + 2 }, (_, i) => `s${i}.js`), 'env.js', 'new.js'];
  const out = plan(files, (f) => seconds[f] ?? (f.startsWith('s') ? 1 : undefined), (f) => (f === 'env.js' ? 'process.env.A = "1";' : ''));
  assert.equal(out[0], 'long.js');
  const groups = out.filter((e): e is Group => typeof e === 'object');
  assert.deepEqual(groups.map((g) => g.members.length), [GROUP_FILES, 2]);
  assert.deepEqual(groups.flatMap((g) => g.members), files.slice(1, GROUP_FILES + 3), 'in the order given');
  assert.deepEqual(out.slice(-2), ['env.js', 'new.js']);
});

test("a group's files fill it up to its time budget; a group of one is the file alone", () => {
  const each = SHORT_S - 1;
  const fit = Math.floor(GROUP_S / each);
  const files = Array.from({ length: fit + 1 }, (_, i) => `f${i}.js`);
  const out = plan(files, () => each, () => '');
  assert.deepEqual(out, [{ members: files.slice(0, fit), seconds: fit * each }, files[fit]]);
});

test("in a group each file's tests and hooks are its own, and a failure is named by its file", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sb-groups-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'test'), { recursive: true });
  await mkdir(join(dir, '.test-groups'), { recursive: true });
  await writeFile(join(dir, 'package.json'), '{"type":"module"}\n');
  const member = (name: string, body: string) =>
    writeFile(
      join(dir, 'test', `${name}.test.js`),
      `import assert from 'node:assert/strict';\nimport { after, before, test } from 'node:test';\nlet ready = false;\n` +
        `before(() => { ready = true; console.log('${name} before'); });\nafter(() => console.log('${name} after'));\n${body}\n`,
    );
  await member('a', "test('a works', () => assert.ok(ready));");
  // A top-level await before its tests, as files that start a server first have.
  await member('b', "await new Promise((r) => setTimeout(r, 20));\ntest('b fails', () => assert.fail('b is broken'));");
  await member('c', "test('c works', () => assert.ok(ready));");
  const group = join(dir, '.test-groups', '01.test.js');
  await writeFile(group, groupSource(['test/a.test.js', 'test/b.test.js', 'test/c.test.js'], '.test-groups'));

  const run = await promisify(execFile)(process.execPath, ['--test', '--test-reporter=tap', group], { cwd: dir, env: withoutTestContext() }).then(
    (ok: { stdout: string }) => assert.fail(`the group must fail: b fails; it printed:\n${ok.stdout}`),
    (err: { stdout: string }) => err.stdout,
  );
  const lines = run.split('\n');
  const at = (text: string) => lines.findIndex((line) => line.includes(text));
  // Each file's hooks run around its own tests, in turn: a's after before b's before.
  assert.ok(at('a before') < at('a after') && at('a after') < at('b before') && at('b after') < at('c before'), run);
  assert.match(run, /not ok \d+ - b fails/);
  assert.match(run, /not ok \d+ - test\/b\.test\.ts/, 'the failure is under its file');
  assert.match(run, /ok \d+ - test\/a\.test\.ts/);
  assert.match(run, /ok \d+ - test\/c\.test\.ts/, 'a failing file does not stop the next');
  assert.match(run, /# pass 2/);
  assert.match(run, /# fail 1/);
});
