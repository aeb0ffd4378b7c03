/**
 * The folder layering of src/ (issue 14, "Done when"): no two folders import each other and
 * no chain of folders leads back to where it started; docs/folder-graph.md shows the graph as
 * the code has it. The check itself is proven on a small tree that has both faults, so a
 * passing run on src/ means something.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  GRAPH_COMMAND,
  againstLayers,
  ROOT_FOLDER,
  findProblems,
  folderGraphOf,
  formatProblems,
  levels,
  renderMarkdown,
} from '../../scripts/folder-graph.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SRC = join(ROOT, 'src');

/** Writes `files` (path → content) below a new temporary folder and returns its `src/`. */
function tree(files: Record<string, string>): string {
  const base = mkdtempSync(join(tmpdir(), 'folder-graph-'));
  after(() => rmSync(base, { recursive: true, force: true }));
  for (const [file, text] of Object.entries(files)) {
    const full = join(base, 'src', file);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, text);
  }
  return join(base, 'src');
}

describe('folder graph of src/', () => {
  test('no two folders import each other and there is no cycle of folders', () => {
    const problems = findProblems(folderGraphOf(SRC));
    const report = formatProblems(problems);
    assert.equal(problems.pairs.length, 0, `two-way folder pairs in src/ (see docs/architecture.md#layering):\n${report}`);
    assert.equal(problems.cycles.length, 0, `folder cycles in src/ (see docs/architecture.md#layering):\n${report}`);
  });

  test(`docs/folder-graph.md is what \`${GRAPH_COMMAND}\` writes for the code as it is`, () => {
    const file = join(ROOT, 'docs', 'folder-graph.md');
    const written = existsSync(file) ? readFileSync(file, 'utf8') : '';
    assert.ok(
      written === renderMarkdown(folderGraphOf(SRC)),
      `docs/folder-graph.md does not match the imports in src/: run \`${GRAPH_COMMAND}\` and commit docs/folder-graph.md`,
    );
  });
});

describe('the check (on a small tree with a two-way pair and a three-folder cycle)', () => {
  const faulty = tree({
    'main.ts': "import { one } from './a/one.js';\nexport const main = one;\n",
    'a/one.ts': "import { two } from '../b/two.js';\nexport const one = two;\n",
    'b/two.ts': "import type { Unused } from '../a/one.js';\nexport const two = 2;\nexport type Unused = number;\n",
    'c/x.ts': "// import { ok } from '../f/ok.js'  (a comment: not an import)\nimport { y } from '../d/y.js';\nexport const x = y;\n",
    'd/y.ts': "export * from '../e/z.js';\nexport const y = 1;\n",
    'e/z.ts': "export const z = () => import('../c/x.js');\nconst text = \"import '../f/ok.js'\";\nexport { text };\n",
    'f/ok.ts': "import { x } from '../c/x.js';\nimport { readFileSync } from 'node:fs';\nexport const ok = [x, readFileSync];\n",
  });

  test('finds the two-way pair with the imports that make it', () => {
    const { pairs } = findProblems(folderGraphOf(faulty));
    assert.deepEqual(pairs.map(([there, back]) => [there.from, there.to, back.from, back.to]), [['a', 'b', 'b', 'a']]);
    const [there, back] = pairs[0]!;
    assert.deepEqual(there.imports, [{ from: 'a/one.ts', to: 'b/two.ts', line: 1 }]);
    assert.deepEqual(back.imports, [{ from: 'b/two.ts', to: 'a/one.ts', line: 1 }], 'a type-only import counts');
  });

  test('finds the cycle through three folders, through export-from and a dynamic import, and nothing outside it', () => {
    const graph = folderGraphOf(faulty);
    const { cycles } = findProblems(graph);
    assert.equal(cycles.length, 1);
    assert.deepEqual(cycles[0]!.path, ['c', 'd', 'e', 'c']);
    assert.deepEqual(cycles[0]!.edges.map((e) => `${e.from}>${e.to}`), ['c>d', 'd>e', 'e>c']);
    assert.ok(!graph.edges.some((e) => e.from === 'c' && e.to === 'f'), 'imports in comments and strings do not count');
    assert.ok(graph.edges.some((e) => e.from === ROOT_FOLDER && e.to === 'a'), 'files directly in src/ are the (root) folder');
    assert.equal(levels(graph), undefined, 'no levels when there is a cycle');
  });

  test('--check exits 1 and prints every offending file-level import', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/folder-graph.ts', '--check', '--src', faulty], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(run.status, 1, run.stdout + run.stderr);
    for (const line of ['two-way pair: a ⇄ b', 'src/a/one.ts:1 → src/b/two.ts', 'src/b/two.ts:1 → src/a/one.ts', 'cycle: c → d → e → c', 'src/c/x.ts:2 → src/d/y.ts', 'src/d/y.ts:1 → src/e/z.ts', 'src/e/z.ts:1 → src/c/x.ts']) {
      assert.ok(run.stderr.includes(line), `missing "${line}" in:\n${run.stderr}`);
    }
  });

  test('a layered tree passes, with levels counted from the bottom', () => {
    const layered = tree({
      'main.ts': "import { top } from './top/top.js';\nexport const main = top;\n",
      'top/top.ts': "import { mid } from '../mid/mid.js';\nimport { low } from '../low/low.js';\nexport const top = mid + low;\n",
      'mid/mid.ts': "import { low } from '../low/low.js';\nexport const mid = low;\n",
      'low/low.ts': 'export const low = 1;\n',
    });
    const graph = folderGraphOf(layered);
    assert.deepEqual(findProblems(graph), { pairs: [], cycles: [] });
    assert.deepEqual(Object.fromEntries(levels(graph)!), { [ROOT_FOLDER]: 3, low: 0, mid: 1, top: 2 });
    assert.deepEqual(graph.edges.map((e) => `${e.from}>${e.to}:${e.weight}`), ['(root)>top:1', 'mid>low:1', 'top>low:1', 'top>mid:1']);
    assert.deepEqual(againstLayers(graph, ['low', 'mid', 'top', ROOT_FOLDER]), []);
    assert.deepEqual(againstLayers(graph, ['mid', 'low', 'top', ROOT_FOLDER]).map((e) => `${e.from}>${e.to}`), ['mid>low'], 'an import against the documented order is named');
  });
});
