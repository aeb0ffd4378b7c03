/**
 * The size rules (issue 14, "Done when"; STYLE.md): no file in src/ over 400 lines, no
 * function over 80. The check is proven on a small tree with a function of each kind just
 * over the limit and one exactly at it, so a passing run on src/ means something.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { MAX_FILE_LINES, MAX_FUNCTION_LINES, formatShape, lineCount, measureShape } from '../../scripts/code-shape.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** `count` statement lines, each its own line. */
function body(count: number): string {
  return Array.from({ length: count }, (_, i) => `  void ${i};\n`).join('');
}

function shapeTree(files: Record<string, string>): string {
  const base = mkdtempSync(join(tmpdir(), 'code-shape-'));
  after(() => rmSync(base, { recursive: true, force: true }));
  mkdirSync(join(base, 'src', 'part'), { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(base, 'src', file), text);
  return join(base, 'src');
}

describe('code shape of src/', () => {
  test(`no file over ${MAX_FILE_LINES} lines and no function over ${MAX_FUNCTION_LINES}`, () => {
    const report = measureShape(join(ROOT, 'src'));
    assert.equal(report.files.length + report.functions.length, 0, `split these (docs/architecture.md#size):\n${formatShape(report)}`);
  });
});

describe('the check (on a small tree)', () => {
  const at = MAX_FUNCTION_LINES - 2; // a function of MAX lines: its head, this many, its brace
  const src = shapeTree({
    'part/at-limit.ts': `/** JSDoc lines do not count. */\nexport function atLimit() {\n${body(at)}}\n`,
    'part/declared.ts': `export function overLimit() {\n${body(at + 1)}}\n`,
    'part/assigned.ts': `export const assigned = () => {\n${body(at + 1)}};\n`,
    'part/passed.ts': `declare const app: { get(path: string, handler: () => void): void };\napp.get('/x', () => {\n${body(at + 1)}});\n`,
    'part/method.ts': `export class Box {\n  run() {\n${body(at + 1)}  }\n}\n`,
    'part/long-file.ts': body(MAX_FILE_LINES + 1),
    'part/file-at-limit.ts': body(MAX_FILE_LINES),
  });

  test('catches each function over the limit, by a name a reader can find, and leaves one at the limit', () => {
    const report = measureShape(src);
    assert.deepEqual(
      report.functions.map((f) => [f.file, f.name, f.lines]),
      [
        ['part/assigned.ts', 'assigned', MAX_FUNCTION_LINES + 1],
        ['part/declared.ts', 'overLimit', MAX_FUNCTION_LINES + 1],
        ['part/method.ts', 'Box.run', MAX_FUNCTION_LINES + 1],
        ['part/passed.ts', '(anonymous, passed to app.get)', MAX_FUNCTION_LINES + 1],
      ],
    );
  });

  test('catches a file over the limit and leaves one at it', () => {
    assert.deepEqual(measureShape(src).files, [{ file: 'part/long-file.ts', lines: MAX_FILE_LINES + 1 }]);
    assert.equal(lineCount('a\nb\n'), 2);
    assert.equal(lineCount('a\nb'), 2);
  });

  test('the command exits 1 and names each offender', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/code-shape.ts', '--src', src], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(run.status, 1, run.stdout + run.stderr);
    assert.match(run.stderr, /file over 400 lines: .*part\/long-file\.ts \(401\)/);
    assert.match(run.stderr, /function over 80 lines: .*part\/declared\.ts:1 overLimit \(81\)/);
  });
});
