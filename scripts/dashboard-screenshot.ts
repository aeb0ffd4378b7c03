/**
 * The screenshot of the chart's Grafana dashboard in docs/operations.md (issue 45 §4), made
 * without Grafana (none on the build machine): every panel of
 * helm/switchboard/files/grafana-dashboard.json is evaluated by a real Prometheus server
 * against a running gateway and drawn by this script.
 *
 *   node --import tsx scripts/dashboard-screenshot.ts [--seconds 120] [--out docs/images/dashboard.png] [--html FILE]
 *
 * It starts Redis, the OAuth issuer, a reference MCP server (server-everything), a backend
 * with a pinned tool that changes midway, the token-exchange server and a backend behind it,
 * and the gateway from its CLI (`src/cli.ts --config`, watching its file), with a backend
 * that is down and a policy rule that refuses one search. Prometheus (Debian's binary,
 * scripts/fetch-promtool.sh prometheus) scrapes the gateway's `/metrics` every 2 s, on
 * 127.0.0.1, with the labels prometheus-operator gives a pod (namespace, job, pod). Users
 * call tools for `--seconds` (scripts/dashboard/traffic.ts) while the config is reloaded
 * (twice refused), the gateway's Redis connections are killed and the exchange server hangs. Then each panel's queries go to
 * Prometheus' `query_range` API with Grafana's substitutions (grafana-query.ts), the page is
 * laid out by the panels' gridPos (dashboard-page.ts) and Chromium (playwright-core,
 * /usr/bin/chromium) takes the picture. Everything started is stopped at the end; the
 * whole run is bounded (`--seconds` + 4 minutes), then it exits whatever is left.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { startGateway, type Gateway } from '../bench/processes.js';
import { launchBrowser } from '../test/helpers/browser.js';
import { startEverything } from '../test/helpers/everything.js';
import { startExchangeBackend, startExchangeServer } from '../test/helpers/exchange.js';
import { freePort } from '../test/helpers/free-port.js';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { startMutableBackend } from '../test/fixtures/mutable-tools-backend.js';
import { dashboardPage, type DashboardPanel } from './dashboard/dashboard-page.js';
import { legendName, rateIntervalSeconds, substituteVariables } from './dashboard/grafana-query.js';
import type { Series } from './dashboard/panel-svg.js';
import { startPrometheus, type PrometheusServer } from './dashboard/prometheus-server.js';
import { driveTraffic } from './dashboard/traffic.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DASHBOARD = 'helm/switchboard/files/grafana-dashboard.json';
const SCRAPE_SECONDS = 2;
const LABELS = { namespace: 'mcp', pod: 'switchboard-7c9d4b5f6-x2k8q' };
const JOB = 'switchboard';
const USERS = ['alice', 'bob', 'carol'];

const argv = process.argv.slice(2);
const option = (flag: string) => (argv.includes(flag) ? argv[argv.indexOf(flag) + 1] : undefined);
const seconds = Number(option('--seconds') ?? 120);
const out = resolve(option('--out') ?? `${ROOT}docs/images/dashboard.png`);
const htmlOut = option('--html');
if (!(seconds >= 30 && seconds <= 900)) throw new Error(`--seconds must be between 30 and 900 (got ${option('--seconds')})`);

const log = (line: string) => process.stderr.write(`[dashboard ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const stops: Array<() => Promise<unknown>> = [];

/** The gateway's config file as written by bench/processes.ts (JSON), changed and written back: the CLI's watch reloads it. */
function rewriteConfig(gateway: Gateway, change: (config: Record<string, any>) => Record<string, any>): void {
  writeFileSync(gateway.configFile, `${JSON.stringify(change(JSON.parse(readFileSync(gateway.configFile, 'utf8')) as Record<string, any>), null, 2)}\n`);
}

async function startAll() {
  const [redis, oauth, everything] = await Promise.all([startRedis(), startOAuthServer(), startEverything()]);
  const redisAdmin = new Redis(redis.url);
  stops.push(async () => redisAdmin.disconnect());
  stops.push(() => redis.stop(), () => oauth.stop(), () => everything.stop());
  const exchange = await startExchangeServer({ idpIssuer: oauth.issuer, tokenTtlSeconds: 20 });
  stops.push(() => exchange.stop());
  const hr = await startExchangeBackend(exchange.issuer, 'hr-api');
  stops.push(() => hr.stop());
  const catalog = await startMutableBackend('2025-11-25');
  stops.push(() => catalog.close());
  const backends = [
    { name: 'everything', url: everything.url },
    { name: 'catalog', url: catalog.url, pinning: { mode: 'log' } },
    { name: 'hr', url: hr.url, timeout: '3s', tokenExchange: { tokenUrl: exchange.tokenUrl, clientId: exchange.clientId, clientSecret: exchange.clientSecret, audience: 'hr-api', scopes: ['hr.read'] } },
    { name: 'down', url: `http://127.0.0.1:${await freePort()}/mcp`, timeout: '2s' },
  ];
  const policy = { rules: [{ name: 'no-secret-searches', effect: 'deny', when: 'mcp.backend == "catalog" && mcp.tool.name == "search" && mcp.tool.arguments.query == "secrets"' }] };
  const gateway = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [], logLevel: 'warn', extra: { backends, policy, secrets: { tokenKey: 'dashboard-screenshot-token-key-0123456789' } } });
  stops.push(() => gateway.child.stop());
  const prometheus = await startPrometheus({ address: new URL(gateway.url).host, scrapeSeconds: SCRAPE_SECONDS, labels: LABELS, job: JOB });
  stops.push(() => prometheus.stop());
  const tokens: Record<string, string> = {};
  for (const user of USERS) tokens[user] = await oauth.token({ sub: user, aud: gateway.audience, scope: 'hr' });
  return { gateway, prometheus, tokens, exchange, catalog, redisAdmin };
}

/**
 * The operator's moves during the traffic, at fractions of it: reloads (one refused, then
 * fixed), a changed tool, Redis connections killed (the store waits), a hanging STS. A
 * counter's first event does not show in `increase()` or `rate()` (the series starts at 1),
 * as in Grafana; so reloads and refusals come more than once.
 */
async function operatorMoves(all: Awaited<ReturnType<typeof startAll>>, startedAt: number, until: number): Promise<void> {
  const at = async (fraction: number) => sleep(Math.max(0, startedAt + fraction * (until - startedAt) - Date.now()));
  await at(0.12);
  log('config reload: a policy rule renamed (applied)');
  rewriteConfig(all.gateway, (c) => ({ ...c, policy: { rules: c.policy.rules.map((r: Record<string, unknown>) => ({ ...r, name: 'no-secret-queries' })) } }));
  await at(0.3);
  log('the catalog backend changes its search tool (pinning)');
  all.catalog.revision = 2;
  await at(0.4);
  log('config reload: one more policy rule (applied)');
  rewriteConfig(all.gateway, (c) => ({ ...c, policy: { rules: [...c.policy.rules, { name: 'no-deletes', effect: 'deny', when: 'mcp.tool.name.startsWith("delete_")' }] } }));
  await at(0.45);
  log('the gateway\'s Redis connections killed, 4 times 2 s apart (the store waits)');
  for (let i = 0; i < 4; i++) {
    await all.redisAdmin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes').catch(() => {});
    await sleep(2000);
  }
  await at(0.57);
  log('the token exchange server hangs');
  await all.exchange.setMode('hang');
  await at(0.65);
  await all.exchange.setMode('normal');
  log('config reload: a broken file (refused)');
  const good = readFileSync(all.gateway.configFile, 'utf8');
  rewriteConfig(all.gateway, (c) => ({ ...c, limits: 'none' }));
  await at(0.72);
  rewriteConfig(all.gateway, (c) => ({ ...c, limits: 'unlimited' }));
  await at(0.8);
  log('config reload: the file fixed (applied)');
  writeFileSync(all.gateway.configFile, good.replace('"no-deletes"', '"no-deletes-or-drops"'));
}

/** Every panel's targets through query_range, named by their legendFormat. */
async function panelData(prometheus: PrometheusServer, panels: Array<DashboardPanel & { targets?: Array<{ expr: string; legendFormat?: string }> }>, start: number, end: number) {
  const step = Math.max(SCRAPE_SECONDS, Math.ceil((end - start) / 240));
  const variables = { namespace: LABELS.namespace, job: JOB, backend: '.*' };
  const rate = rateIntervalSeconds(step, SCRAPE_SECONDS);
  const drawn: Array<{ panel: DashboardPanel; series: Series[] }> = [];
  for (const panel of panels) {
    const series: Series[] = [];
    for (const target of panel.targets ?? []) {
      const expr = substituteVariables(target.expr, variables, rate);
      for (const r of await prometheus.queryRange(expr, start, end, step)) series.push({ name: legendName(target.legendFormat, r.labels, expr), points: r.points });
    }
    drawn.push({ panel, series });
  }
  return { drawn, step, rate };
}

async function screenshot(html: string, height: number): Promise<void> {
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    await page.setViewportSize({ width: 1280, height });
    await page.setContent(html);
    await page.screenshot({ path: out, fullPage: true });
  } finally {
    await browser.close();
  }
}

async function main(): Promise<void> {
  log('starting Redis, the issuer, the backends, the gateway and Prometheus');
  const all = await startAll();
  const startedAt = Date.now();
  const until = startedAt + seconds * 1000;
  log(`traffic for ${seconds} s: ${USERS.join(', ')} on ${all.gateway.url}; Prometheus on ${all.prometheus.url}`);
  const [counts] = await Promise.all([driveTraffic({ gatewayUrl: all.gateway.url, tokens: all.tokens }, until), operatorMoves(all, startedAt, until)]);
  log(`calls: ${Object.entries(counts).map(([what, c]) => `${what} ${c.ok} ok/${c.failed} failed`).join('; ')}`);
  await sleep(2 * SCRAPE_SECONDS * 1000 + 500);
  log(`successful scrapes: ${await all.prometheus.scrapes()}`);
  const dashboard = JSON.parse(readFileSync(`${ROOT}${DASHBOARD}`, 'utf8')) as { title: string; panels: DashboardPanel[] };
  // The picture is the traffic's window: past its end the users' sessions are gone, and the
  // stat panels (their last value) would read 0.
  const start = Math.floor(startedAt / 1000) - 10;
  const end = Math.floor(until / 1000) - SCRAPE_SECONDS;
  const { drawn, step, rate } = await panelData(all.prometheus, dashboard.panels, start, end);
  const caption = `${DASHBOARD}: each panel's own queries (step ${step} s, $__rate_interval ${rate} s), evaluated by Prometheus 2.42 scraping a running gateway every ${SCRAPE_SECONDS} s, drawn by scripts/dashboard-screenshot.ts (not Grafana). ${new Date(start * 1000).toISOString().slice(0, 16)}Z + ${Math.round((end - start) / 60)} min.`;
  const html = dashboardPage(dashboard.title, drawn, { width: 1268, rowHeight: 26, start, end, caption });
  if (htmlOut) writeFileSync(htmlOut, html);
  await screenshot(html, 900);
  log(`wrote ${out} (${Math.round(statSync(out).size / 1024)} KiB)`);
}

const DEADLINE_MS = (seconds + 240) * 1000;
const deadline = setTimeout(() => {
  log(`not done after ${DEADLINE_MS / 1000} s: stopping`);
  void stopAll().then(() => process.exit(1));
}, DEADLINE_MS);

async function stopAll(): Promise<void> {
  await Promise.allSettled(stops.splice(0).reverse().map((stop) => stop()));
}

main()
  .then(
    () => 0,
    (err: unknown) => {
      log(`failed: ${(err as Error)?.stack ?? String(err)}`);
      return 1;
    },
  )
  .then(async (code) => {
    await stopAll();
    clearTimeout(deadline);
    process.exit(code);
  });
