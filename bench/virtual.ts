/**
 * `node --import tsx bench/virtual.ts [--rounds N] [--seconds S]` (defaults: 12 rounds of 2 s
 * after warm-up): the virtual-server phase of `npm run bench` (bench/virtual-phase.ts) alone —
 * what a call through a virtual server (issue 31 §1) costs against the same call through `/mcp`.
 * Target: within 5 %.
 *
 * One gateway (silent, Redis, the bench issuer) and the JSON fast backend (bench/fast-backend.ts).
 */
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { baseHeaders, type Path } from './load.js';
import { startBackend, startGateway, type Backend, type Gateway } from './processes.js';
import { measureVirtual, openVirtualPaths, VIRTUAL_SERVERS } from './virtual-phase.js';

function option(argv: string[], flag: string, fallback: number): number {
  const i = argv.indexOf(flag);
  return i < 0 ? fallback : Number(argv[i + 1]);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opts = { rounds: option(argv, '--rounds', 12), durationMs: option(argv, '--seconds', 2) * 1000, warmupMs: 4500, connections: 16 };
  let redis: RedisHandle | undefined;
  let oauth: OAuthHandle | undefined;
  let backend: Backend | undefined;
  let gateway: Gateway | undefined;
  let paths: Path[] = [];
  try {
    process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
    [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
    backend = await startBackend(false);
    gateway = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], logLevel: 'silent', extra: { servers: VIRTUAL_SERVERS } });
    const pair = await openVirtualPaths(gateway.url, baseHeaders(await oauth.token({ sub: 'bench-user', aud: gateway.audience })));
    paths = pair;
    const r = await measureVirtual(pair, gateway.child.pid, opts);
    process.stdout.write(
      `virtual server vs /mcp (median per-round ratios, virtual ÷ /mcp; target: CPU per call ≤ 1.05)\n` +
        `  /mcp          CPU per call ${r.mcpCpuUsPerCall.toFixed(0)} µs, ${r.mcpCallsPerSec.toFixed(0)} calls/s\n` +
        `  /mcp/curated  CPU per call ${r.virtualCpuUsPerCall.toFixed(0)} µs, ${r.virtualCallsPerSec.toFixed(0)} calls/s\n` +
        `  CPU per call ratio ${r.cpuRatio.toFixed(3)} ${r.cpuRatio <= 1.05 ? '(within 5 %)' : '(OVER 5 %)'}; calls/s ratio ${r.rateRatio.toFixed(3)}` +
        (r.errors ? `; ${r.errors} failed calls (${r.firstError})` : '') +
        '\n',
    );
  } finally {
    for (const p of paths) await p.pool.close().catch(() => {});
    await gateway?.child.stop().catch(() => {});
    await backend?.child.stop().catch(() => {});
    await Promise.allSettled([redis?.stop(), oauth?.stop()]);
  }
}

await main();
