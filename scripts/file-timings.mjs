/**
 * A node:test reporter that keeps each test file's wall time (issue 43: "a creeping suite shows
 * up when it creeps"). The runner reports a file's end as `test:complete` whose name is the
 * file's path, with the time from its process's start; this writes one line per file, slowest
 * first, as `<seconds>\t<file>`, when the run ends. scripts/run-tests.sh prints the first ten.
 * The runner runs the compiled tree (scripts/compile-tests.mjs) from its root: a file is named
 * by its source (the `.test.ts`), so timings.txt orders the next run whichever way it runs; a
 * file that ran in a group of short files (scripts/group-tests.mjs) by its suite there.
 */
import { relative } from 'node:path';
import { GROUPS_DIR, sourceName } from './group-tests.mjs';

export default async function* fileTimings(source) {
  const files = [];
  for await (const event of source) {
    const data = event.data;
    if (event.type !== 'test:complete' || !data?.file) continue;
    const file = relative(process.cwd(), data.file);
    // A group of short files (scripts/group-tests.mjs): each member is a suite named by its source.
    const grouped = file.startsWith(`${GROUPS_DIR}/`);
    if (grouped ? data.nesting !== 0 || !/\.test\.ts$/.test(data.name) : data.name !== data.file) continue;
    files.push({ file: grouped ? data.name : sourceName(file), seconds: (data.details?.duration_ms ?? 0) / 1000, ok: data.details?.passed !== false });
  }
  files.sort((a, b) => b.seconds - a.seconds);
  for (const { file, seconds, ok } of files) yield `${seconds.toFixed(1)}\t${file}${ok ? '' : '\t(failed)'}\n`;
}
