/**
 * How a test starts one of the project's TypeScript files as its own Node process (a gateway,
 * a fixture server): the arguments to put after `process.execPath`.
 *
 * Under `npm test` the tests run from the compiled tree (scripts/compile-tests.mjs, issue 43),
 * where every `.ts` has its `.js` beside it: the child runs that, as plain JavaScript, without
 * the 1.1 s of CPU tsx's loader costs each process. Run from the sources (`node --import tsx
 * --test test/x.test.ts`), there is no `.js`, and the child runs the `.ts` under tsx as before.
 */
import { existsSync } from 'node:fs';

/** Whether this module itself runs compiled (its URL names the `.js` the tree holds). */
const COMPILED = import.meta.url.endsWith('.js');
const TSX = import.meta.resolve('tsx');

/** `[file.js]` in the compiled tree, else `['--import', tsx, file.ts]`; `file` is a `.ts` path. */
export function nodeEntry(file: string): string[] {
  const compiled = file.replace(/\.ts$/, '.js');
  return COMPILED && compiled !== file && existsSync(compiled) ? [compiled] : ['--import', TSX, file];
}
