/**
 * `npm test`'s compiled tree (issue 43): every `.ts` of src/ and test/ transpiled once to `.js`
 * with esbuild (the transpiler tsx itself runs), so the test files and the gateways, fixtures
 * and clients they start run as plain JavaScript. Under `--import tsx` each of those processes
 * spent about 1.1 s of CPU on the loader alone (its hooks run on a second thread, every module
 * crossing it), and a run starts some 500 of them.
 *
 * The tree is a stand-in for the checkout: each of its files (git's list: tracked, and new ones
 * not ignored) is hard-linked into it at its own path, with every `.ts` compiled to a `.js`
 * beside it, and node_modules is a link to the real one. Hard links, not symlinks: a test that
 * walks a folder sees files (a symlink is not one to `Dirent.isFile()`), and a `.ts` started
 * with tsx from the tree resolves its imports inside the tree. So `new URL('../../',
 * import.meta.url)` in a compiled test is a root with everything a test reads, as it is for the
 * sources, and package resolution finds node_modules as before.
 *
 * Each run builds its own tree under `.test-build/` (runs side by side in one checkout must not
 * replace each other's files) and removes it at the end; trees older than a day are swept.
 *
 * Usage: node scripts/compile-tests.mjs  → prints the tree's absolute path.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, linkSync, lstatSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BUILDS = join(ROOT, '.test-build');
/** Linked into the tree as folders: installed, not part of the checkout's file list. */
const LINKED = ['node_modules', 'dist'];
const DAY_MS = 24 * 60 * 60 * 1000;

/** The checkout's files, relative to ROOT: git's list where there is one, else a walk. */
function checkoutFiles() {
  try {
    const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    return listed.split('\0').filter((file) => file !== '' && existsSync(join(ROOT, file)));
  } catch {
    return readdirSync(ROOT, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)))
      .filter((file) => !/^(\.git|\.test-build|node_modules|dist)(\/|$)|\/node_modules\//.test(file));
  }
}

/** Hard-links `file` into `tree` (a copy where the two are on different file systems). */
function place(file, tree) {
  const target = join(tree, file);
  mkdirSync(dirname(target), { recursive: true });
  try {
    linkSync(join(ROOT, file), target);
  } catch {
    copyFileSync(join(ROOT, file), target);
  }
}

function sweepOldTrees() {
  let entries = [];
  try {
    entries = readdirSync(BUILDS);
  } catch {
    return;
  }
  for (const name of entries) {
    const path = join(BUILDS, name);
    if (Date.now() - lstatSync(path).mtimeMs > DAY_MS) rmSync(path, { recursive: true, force: true });
  }
}

async function main() {
  sweepOldTrees();
  const tree = join(BUILDS, `run-${process.pid}-${Date.now().toString(36)}`);
  mkdirSync(tree, { recursive: true });
  for (const entry of LINKED) if (existsSync(join(ROOT, entry))) symlinkSync(join(ROOT, entry), join(tree, entry));
  const files = checkoutFiles();
  for (const file of files) place(file, tree);
  const sources = files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'));
  await build({
    entryPoints: sources.map((file) => join(tree, file)),
    outdir: tree,
    outbase: tree,
    bundle: false,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node.split('.')[0]}`,
    // Linked maps (`x.js.map` beside `x.js`), not inline ones: every process reads and decodes
    // each module it imports, and an inline map made those files 3-4 times larger (src/app.js
    // 34 KB against 9 KB); importing the gateway cost about 0.15-0.2 s more CPU with them.
    // `--enable-source-maps` finds the linked map all the same.
    sourcemap: 'linked',
    // Which compiler options apply (verbatimModuleSyntax: imports kept as written).
    tsconfig: join(ROOT, 'tsconfig.json'),
    logLevel: 'error',
  });
  process.stdout.write(`${tree}\n`);
}

main().catch((err) => {
  process.stderr.write(`compile-tests: ${err?.stack ?? err}\n`);
  process.exit(1);
});
