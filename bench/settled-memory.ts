/**
 * The gateway's memory as a user measures it from outside (issue 45 §3): RSS (`VmRSS` from
 * /proc/<pid>/status) once garbage collection has settled. Nothing is attached to the
 * process and nothing forces a collection — the bench used to force two through the
 * inspector, which showed memory the process does not give back by itself (279 MB with
 * 10,000 idle streams where a user saw 332). The process has to get there on its own: V8's
 * memory reducer runs full collections some tens of seconds after the allocation rate
 * drops, and RSS falls then.
 *
 * A sample waits for a full ("major") collection that starts after the sample was asked for
 * — counted by the gateway's own `nodejs_gc_duration_seconds_count{kind="major"}` on
 * /metrics, read as Prometheus would — and then for RSS to hold still (within
 * `toleranceBytes` over `windowMs`). A process with nothing to collect (idle since it
 * started) runs no collection: RSS that held still for the whole of `maxWaitMs` counts as
 * settled too. Otherwise, past `maxWaitMs`, it gives the last reading and says it did not
 * settle. The JS heap figures come from the same /metrics.
 */
import { processRssBytes } from './system.js';
import { sleep } from './sampling.js';

export interface SettleBounds {
  /** Give up waiting after this long (the sample is then marked unsettled). */
  maxWaitMs: number;
  /** How long RSS must hold still after the collection. */
  windowMs: number;
  toleranceBytes: number;
}

/** Bounds of `npm run bench` (full), of `--quick`, and what bench/memory.ts uses unless told. */
export const SETTLE_BOUNDS: Record<'quick' | 'full', SettleBounds> = {
  quick: { maxWaitMs: 45_000, windowMs: 8_000, toleranceBytes: 2 * 1024 * 1024 },
  // 30 s: a collection that merely ends the load's own garbage is often followed, within
  // tens of seconds, by the memory reducer's, which gives back tens of MB; 10 s read the first.
  full: { maxWaitMs: 150_000, windowMs: 30_000, toleranceBytes: 2 * 1024 * 1024 },
};

export interface MemorySample {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** Whether RSS held still after a full collection that came after the sample was asked for, or for the whole wait. */
  settled: boolean;
  /** How many full collections the gateway ran while the sample waited. */
  fullCollections: number;
  waitedMs: number;
}

interface HeapFigures {
  heapUsed: number;
  heapTotal: number;
  external: number;
  majorGcs: number;
}

const METRICS_EVERY_MS = 5_000;
const RSS_EVERY_MS = 1_000;

/**
 * The gateway's heap figures and full-collection count, from its /metrics. Up to 3 tries of
 * 30 s each: on a crowded machine, a gateway that just opened 10,000 streams took longer than
 * one 10 s try (a run ended there, 2026-11-29, load average 18 on 2 cores).
 */
async function heapFigures(metricsUrl: string): Promise<HeapFigures> {
  let text: string | undefined;
  for (let attempt = 1; text === undefined; attempt++) {
    try {
      text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(30_000) })).text();
    } catch (err) {
      if (attempt >= 3) throw err;
    }
  }
  const value = (pattern: RegExp, absent = NaN) => Number(pattern.exec(text)?.[1] ?? absent);
  return {
    heapUsed: value(/^nodejs_heap_size_used_bytes (\S+)/m),
    heapTotal: value(/^nodejs_heap_size_total_bytes (\S+)/m),
    external: value(/^nodejs_external_memory_bytes (\S+)/m),
    // The series appears with the first full collection.
    majorGcs: value(/^nodejs_gc_duration_seconds_count\{kind="major"\} (\S+)/m, 0),
  };
}

/** Waits for a full collection after now and a still RSS (see the file's comment), bounded by `bounds.maxWaitMs`. */
export async function settledSample(pid: number, metricsUrl: string, bounds: SettleBounds): Promise<MemorySample> {
  const started = Date.now();
  const gcsBefore = (await heapFigures(metricsUrl)).majorGcs;
  const windowSamples = Math.max(2, Math.round(bounds.windowMs / RSS_EVERY_MS));
  let window: number[] = [];
  let [low, high] = [Infinity, -Infinity];
  let collected = false;
  let lastMetrics = Date.now();
  let settled = false;
  while (Date.now() - started < bounds.maxWaitMs) {
    await sleep(RSS_EVERY_MS);
    const rss = processRssBytes(pid);
    [low, high] = [Math.min(low, rss), Math.max(high, rss)];
    window.push(rss);
    if (window.length > windowSamples) window.shift();
    if (!collected && Date.now() - lastMetrics >= METRICS_EVERY_MS) {
      lastMetrics = Date.now();
      collected = (await heapFigures(metricsUrl)).majorGcs > gcsBefore;
      // What counts is how RSS holds after the collection.
      if (collected) window = window.slice(-1);
    }
    if (collected && window.length >= windowSamples && Math.max(...window) - Math.min(...window) <= bounds.toleranceBytes) {
      settled = true;
      break;
    }
  }
  const heap = await heapFigures(metricsUrl);
  // Nothing collected, and nothing moved the whole time: there was nothing to give back.
  settled ||= !collected && high - low <= bounds.toleranceBytes;
  const fullCollections = heap.majorGcs - gcsBefore;
  return { rss: window.at(-1) ?? processRssBytes(pid), heapUsed: heap.heapUsed, heapTotal: heap.heapTotal, external: heap.external, settled, fullCollections, waitedMs: Date.now() - started };
}
