/**
 * Preloaded into every test file's process by run-tests.sh (`node --import` on the runner, which
 * node:test's `run()` passes on to each file it starts): when a test file's process exits, it
 * appends the CPU that file cost to `$SB_TEST_CPU_LOG` (issue 43: measure before cutting; wall
 * time alone says what a file waited for, not what it cost the two cores).
 *
 * The figure is read from `/proc/self/stat` (proc(5)): utime + stime of the file's own process,
 * and cutime + cstime of the children it waited for, which covers the gateways, fixtures,
 * `redis-server`s and Chromium a file starts and stops (each reaps its own children in turn).
 * A child still running when the file exits is not counted. Ticks are USER_HZ, 100 a second on
 * Linux. Line: `<all s>\t<own s>\t<children s>\t<file>\t<start>\t<end>`, the file as its source
 * (`.test.ts`), start and end in seconds since the epoch: when its process began and ended, so
 * that a run's files can be laid on a timeline (which files ran side by side, where a core idled).
 * Any other process that loads this (the runner itself, a child started with the runner's flags)
 * writes nothing.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';

const log = process.env.SB_TEST_CPU_LOG;
const file = process.argv[1];
const USER_HZ = 100;

if (log && file?.endsWith('.test.js')) {
  process.once('exit', () => {
    try {
      const stat = readFileSync('/proc/self/stat', 'utf8');
      // Fields after "(comm)": state is field 3, so utime (14), stime, cutime, cstime are 11–14 here.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const [utime, stime, cutime, cstime] = [11, 12, 13, 14].map((i) => Number(fields[i]) / USER_HZ);
      const own = utime + stime;
      const children = cutime + cstime;
      const source = relative(process.cwd(), file).replace(/\.test\.js$/, '.test.ts');
      const times = `${(performance.timeOrigin / 1000).toFixed(1)}\t${(Date.now() / 1000).toFixed(1)}`;
      appendFileSync(log, `${(own + children).toFixed(2)}\t${own.toFixed(2)}\t${children.toFixed(2)}\t${source}\t${times}\n`);
    } catch {
      // A measurement, not a test: a file whose figure cannot be read is left out of the report.
    }
  });
}
