/**
 * Runs test files with node:test in the order given (issue 43). `node --test a b c` sorts its
 * file arguments by name, so run-tests.sh's order — slowest first (test/timings.txt), so that
 * files side by side do not leave the long ones for last — was lost; `run({ files })` keeps it.
 * Reports as `node --test` did for run-tests.sh: TAP on stdout (its summary is what CI reads),
 * and each file's wall time to the timings file (scripts/file-timings.mjs). Exits 1 when a test
 * failed (not a `todo` or skipped one), as `node --test` does.
 *
 * Usage: node scripts/run-node-tests.mjs <concurrency> <timeout ms> <timings file> <file>...
 */
import { createWriteStream } from 'node:fs';
import { resolve } from 'node:path';
import { run } from 'node:test';
import { tap } from 'node:test/reporters';
import fileTimings from './file-timings.mjs';

const [concurrency, timeout, timingsFile, ...files] = process.argv.slice(2);
if (!files.length || !(Number(concurrency) >= 1) || !(Number(timeout) > 0)) {
  process.stderr.write('usage: node scripts/run-node-tests.mjs <concurrency> <timeout ms> <timings file> <file>...\n');
  process.exit(2);
}

let failed = false;
const stream = run({ files: files.map((file) => resolve(file)), concurrency: Number(concurrency), timeout: Number(timeout) });
stream.on('test:fail', (data) => {
  if (!data.todo && !data.skip) failed = true;
});
stream.compose(tap).pipe(process.stdout);
stream.compose(fileTimings).pipe(createWriteStream(timingsFile));
stream.on('end', () => {
  process.exitCode = failed ? 1 : 0;
});
