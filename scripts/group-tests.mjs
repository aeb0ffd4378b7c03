/**
 * Runs `npm test`'s short, self-contained test files a few to a process (issue 43).
 *
 * Each test file runs in a Node process of its own, and before its first test that process
 * loads its modules: some 700 files for one that imports the gateway, about 0.5–1 s of CPU,
 * as much as the tests of a short file cost. On the 2-core build machine the suite is bound by
 * CPU, so that loading, paid again by some 170 short files, is a run's largest cost after the
 * conformance suites. Here the short files are put in groups: one process imports the files of
 * its group one after another, each inside a `describe` named by the file (its source path), so
 * that the file's tests, and its `before`/`after` hooks, stay its own and run when they did —
 * node:test attaches the tests and hooks a module registers while it is being imported to the
 * suite whose body imports it. Every test still runs, with its assertions, and a failure is
 * reported under its file's name.
 *
 * What a group shares is the process: its modules, its globals and its environment. So only a
 * file that leaves none of them changed may join one; the rest keep a process of their own:
 * - a file that runs longer than {@link SHORT_S} seconds (test/timings.txt), or that timings
 *   does not know yet (a new file), since grouping a long file saves little and slows the
 *   schedule of slowest first;
 * - a file whose text changes what the process shares ({@link SHARED_STATE}): the environment,
 *   the working directory, process listeners or exit code, the global dispatcher, `node:test`
 *   mocks of globals or timers, `console`'s methods, module loader hooks;
 * - a file that says `test-isolation: own-process` in a comment (for what the scan cannot see).
 *
 * Usage: node scripts/group-tests.mjs <tree> <timings file> <compiled file>...
 *   Writes the groups into <tree>/.test-groups/ and prints the files to run, one per line, in
 *   the order given, each group where its slowest member was. With `TEST_GROUPS=0` it prints
 *   the files as given (every file in its own process, as before).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** A file that took longer than this (seconds, wall) in the last full run keeps its own process. */
export const SHORT_S = 6;
/** A group holds at most this many files … */
export const GROUP_FILES = 8;
/** … and at most this much of their last wall time (seconds), so the two cores stay evenly loaded. */
export const GROUP_S = 16;
/** Where the group files go, under the tree's root: outside test/, so no test that walks test/ meets them. */
export const GROUPS_DIR = '.test-groups';

/** What in a test file's text changes state the process shares with the other files of its group. */
export const SHARED_STATE = [
  /process\.env(\.[A-Za-z_$][\w$]*|\[[^\]]+\])\s*=(?!=)/, // the environment, written
  /delete\s+process\.env/,
  /Object\.assign\(\s*process\.env/,
  /process\.(on|once|addListener|prependListener|chdir|umask|setUncaughtExceptionCaptureCallback)\(/,
  /process\.exitCode/,
  /setGlobalDispatcher|setGlobal[A-Z]\w*\(/, // undici's dispatcher, OpenTelemetry's globals
  /(?<![\w$.])mock\.(timers|method|module|fn|getter|setter|property)\b/, // the module-wide mock (t.mock is undone with its test)
  /console\.\w+\s*=(?!=)/,
  /globalThis\.\w+\s*=(?!=)/,
  // module loader hooks: they see every module the process loads after them, and a module the
  // group loaded before (say the OpenTelemetry SDK, test/telemetry/telemetry-off.test.ts) they never see
  /\bregister\(\s*['"`]|\bmodule\.register\(|\bregisterHooks\(/,
  /test-isolation:\s*own-process/,
];

/** Why `source` (a test file's text) must keep its own process, or undefined when it may share one. */
export function ownProcessReason(source) {
  const found = SHARED_STATE.find((pattern) => pattern.test(source));
  return found && `its text matches ${found}`;
}

/**
 * Splits `files` (compiled paths relative to the tree, in run order) into what runs alone and
 * the groups: the run order again, each entry a file or a group `{ members, seconds }` placed
 * where its first (slowest) member was.
 */
export function planGroups(files, secondsOf, sourceOf) {
  const order = [];
  let open;
  for (const file of files) {
    const seconds = secondsOf(file);
    const shareable = seconds !== undefined && seconds <= SHORT_S && !ownProcessReason(sourceOf(file));
    if (!shareable) {
      order.push(file);
      continue;
    }
    if (!open || open.members.length >= GROUP_FILES || open.seconds + seconds > GROUP_S) {
      open = { members: [], seconds: 0 };
      order.push(open);
    }
    open.members.push(file);
    open.seconds += seconds;
  }
  // A group of one is that file, alone, as before.
  return order.map((entry) => (typeof entry === 'object' && entry.members.length === 1 ? entry.members[0] : entry));
}

/** The text of a group file: each member imported inside a suite named by its source. */
export function groupSource(members, fromDir) {
  const lines = [
    '// Written by scripts/group-tests.mjs for one `npm test` run: these test files share this process.',
    "import { describe } from 'node:test';",
  ];
  for (const member of members) {
    const specifier = `./${relative(fromDir, member)}`.replace(/^\.\/\.\.\//, '../');
    lines.push(`describe(${JSON.stringify(sourceName(member))}, async () => {\n  await import(${JSON.stringify(specifier)});\n});`);
  }
  return `${lines.join('\n')}\n`;
}

/** `test/x/y.test.js` → `test/x/y.test.ts`: files are named by their sources in every report. */
export function sourceName(compiled) {
  return compiled.replace(/\.test\.js$/, '.test.ts');
}

function main([tree, timingsFile, ...files]) {
  if (process.env.TEST_GROUPS === '0' || files.length < 2) return files;
  const seconds = new Map();
  for (const line of readFileSync(timingsFile, 'utf8').split('\n')) {
    const [value, file] = line.split('\t');
    if (file) seconds.set(file, Number(value));
  }
  const plan = planGroups(
    files,
    (file) => seconds.get(sourceName(file)),
    (file) => readFileSync(join(tree, file.replace(/\.js$/, '.ts')), 'utf8'),
  );
  const dir = join(tree, GROUPS_DIR);
  mkdirSync(dir, { recursive: true });
  let n = 0;
  const manifest = [];
  const out = plan.map((entry) => {
    if (typeof entry === 'string') return entry;
    const name = `${GROUPS_DIR}/${String(++n).padStart(2, '0')}.test.js`;
    writeFileSync(join(tree, name), groupSource(entry.members, GROUPS_DIR));
    manifest.push(`${sourceName(name)}\t${entry.members.map(sourceName).join(' ')}`);
    return name;
  });
  writeFileSync(join(tree, GROUPS_DIR, 'groups.txt'), `${manifest.join('\n')}\n`);
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const file of main(process.argv.slice(2))) process.stdout.write(`${file}\n`);
}
