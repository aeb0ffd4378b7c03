/**
 * Where `npm test`'s cores went (issue 43): lays the run's files on a timeline from
 * .test-cpu.txt (each file's process start and end, scripts/file-cpu-probe.mjs) beside the
 * machine's CPU from .test-machine-cpu.txt (run-tests.sh's /proc/stat samples), and says for
 * how long the run had fewer files running than it may (the start, the last files, a file
 * the others waited on) and how busy the cores were while it had them all — a suite bound by
 * CPU is busy then, one that waits is not.
 *
 * Usage: node scripts/test-timeline.mjs <.test-cpu.txt> <.test-machine-cpu.txt> <concurrency>
 * Prints one `#` line for run-tests.sh's summary.
 */
import { readFileSync } from 'node:fs';

/** Each file's [start, end] in seconds since the epoch. */
export function fileSpans(cpuText) {
  return cpuText
    .split('\n')
    .map((line) => line.split('\t'))
    .filter((fields) => fields.length >= 6)
    .map((fields) => [Number(fields[4]), Number(fields[5])])
    .filter(([start, end]) => Number.isFinite(start) && Number.isFinite(end) && end >= start);
}

/** The machine's samples: `[epoch s, busy ticks, idle ticks]`. */
export function machineSamples(text) {
  return text
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number))
    .filter((fields) => fields.length === 3 && fields.every(Number.isFinite));
}

/**
 * For each interval between two machine samples: how many files ran (at its middle) and the
 * share of the cores that were busy. Returns the seconds spent below `concurrency` files and,
 * while `concurrency` files ran, the cores' busy share.
 */
export function timeline(spans, samples, concurrency) {
  let belowS = 0;
  let fullS = 0;
  let fullBusy = 0;
  let fullAll = 0;
  for (let i = 1; i < samples.length; i++) {
    const [t0, b0, i0] = samples[i - 1];
    const [t1, b1, i1] = samples[i];
    const middle = (t0 + t1) / 2;
    const running = spans.filter(([start, end]) => start <= middle && middle < end).length;
    if (running < concurrency) {
      belowS += t1 - t0;
      continue;
    }
    fullS += t1 - t0;
    fullBusy += b1 - b0;
    fullAll += b1 - b0 + (i1 - i0);
  }
  return { belowS, fullS, fullBusyShare: fullAll > 0 ? fullBusy / fullAll : 0 };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [cpuFile, machineFile, concurrency] = process.argv.slice(2);
  const spans = fileSpans(readFileSync(cpuFile, 'utf8'));
  const samples = machineSamples(readFileSync(machineFile, 'utf8'));
  const { belowS, fullS, fullBusyShare } = timeline(spans, samples, Number(concurrency));
  process.stdout.write(
    `# timeline: ${Math.round(fullS)} s with ${concurrency} files running, the cores ${Math.round(100 * fullBusyShare)} % busy then; ${Math.round(belowS)} s with fewer (start, end, or files still to come)\n`,
  );
}
