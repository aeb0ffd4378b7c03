/**
 * A real Prometheus server for scripts/dashboard-screenshot.ts: Debian's `prometheus` binary
 * (`bash scripts/fetch-promtool.sh prometheus`, or PROMETHEUS_BIN), listening on 127.0.0.1 only,
 * with its TSDB in a temporary directory removed at stop, scraping one gateway's `/metrics`.
 * The scrape carries the labels prometheus-operator would give a pod of the chart
 * (`namespace`, `job`, `pod`), which the dashboard's queries select on. Range queries go
 * through its HTTP API (`/api/v1/query_range`), as Grafana's Prometheus data source sends them.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnChild, waitUntil, type ChildHandle } from '../../test/helpers/child.js';
import { freePort } from '../../test/helpers/free-port.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ScrapeTarget {
  /** host:port of the gateway. */
  address: string;
  scrapeSeconds: number;
  labels: Record<string, string>;
  job: string;
}

export interface PrometheusServer {
  url: string;
  /** A `query_range` answer's series: labels and [unix seconds, value] points. */
  queryRange(expr: string, start: number, end: number, stepSeconds: number): Promise<Array<{ labels: Record<string, string>; points: Array<[number, number]> }>>;
  /** How many scrapes of the job succeeded so far (the sum of its `up` samples). */
  scrapes(): Promise<number>;
  stop(): Promise<void>;
}

/** The binary: PROMETHEUS_BIN, else .cache/prometheus/prometheus, fetched by scripts/fetch-promtool.sh when missing. */
export function prometheusBinary(): string {
  if (process.env.PROMETHEUS_BIN) return process.env.PROMETHEUS_BIN;
  const cached = join(ROOT, '.cache/prometheus/prometheus');
  if (existsSync(cached)) return cached;
  return execFileSync('bash', [join(ROOT, 'scripts/fetch-promtool.sh'), 'prometheus'], { encoding: 'utf8', timeout: 120_000 }).trim();
}

function scrapeConfig(target: ScrapeTarget): string {
  // JSON is YAML.
  return JSON.stringify({
    global: { scrape_interval: `${target.scrapeSeconds}s`, evaluation_interval: `${target.scrapeSeconds}s` },
    scrape_configs: [{ job_name: target.job, scrape_timeout: `${target.scrapeSeconds}s`, static_configs: [{ targets: [target.address], labels: target.labels }] }],
  });
}

async function apiGet(url: string): Promise<any> {
  const res = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  const body = (await res.json()) as { status: string; data?: any; error?: string };
  if (body.status !== 'success') throw new Error(`Prometheus answered ${res.status}: ${body.error ?? JSON.stringify(body)} (${url})`);
  return body.data;
}

export async function startPrometheus(target: ScrapeTarget): Promise<PrometheusServer> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-prometheus-'));
  writeFileSync(join(dir, 'prometheus.yml'), scrapeConfig(target));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let child: ChildHandle | undefined;
  const stop = async () => {
    await child?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    child = await spawnChild({
      name: 'prometheus',
      command: prometheusBinary(),
      args: [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
      cwd: dir,
      stopGraceMs: 10_000,
    });
    await waitUntil(async () => ((await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).then((r) => r.status).catch(() => 0)) === 200 ? true : undefined), {
      what: `prometheus /-/ready on ${url}`,
      timeoutMs: 30_000,
      intervalMs: 200,
      details: () => child!.logs(),
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    async queryRange(expr, start, end, stepSeconds) {
      const query = new URLSearchParams({ query: expr, start: String(start), end: String(end), step: `${stepSeconds}s` });
      const data = (await apiGet(`${url}/api/v1/query_range?${query}`)) as { resultType: string; result: Array<{ metric: Record<string, string>; values: Array<[number, string]> }> };
      if (data.resultType !== 'matrix') throw new Error(`query_range of ${expr} gave a ${data.resultType}, not a matrix`);
      return data.result.map((r) => ({ labels: r.metric, points: r.values.map(([t, v]) => [t, Number(v)] as [number, number]) }));
    },
    async scrapes() {
      const data = (await apiGet(`${url}/api/v1/query?${new URLSearchParams({ query: `sum_over_time(up{job="${target.job}"}[1h])` })}`)) as { result: Array<{ value: [number, string] }> };
      return Number(data.result[0]?.value[1] ?? 0);
    },
    stop,
  };
}
