/**
 * `node --import tsx bench/virtual.ts [--rounds N] [--seconds S]` (defaults: 12 rounds of 2 s
 * after warm-up): what a call through a virtual server (issue 31 §1, docs/virtual-servers.md)
 * costs against the same call through the aggregated `/mcp` it is built on. Target: within 5 %.
 *
 * One gateway (silent, Redis, the bench issuer), the JSON fast backend (bench/fast-backend.ts)
 * and a virtual server `curated` offering its `echo` tool as `say`, with one argument pinned —
 * the virtual server's whole work per call: the name looked up, the client's arguments checked,
 * the pinned one set, the request re-serialized. Both paths get the same closed-loop load
 * (16 connections) in alternating rounds (the order flips every round), so the noise of a
 * shared machine hits both alike; reported: the median per-round ratio of gateway CPU per call
 * and of calls/s (virtual ÷ /mcp), and `/mcp/fast` beside them for scale.
 */
import { startOAuthServer, type OAuthHandle } from '../test/helpers/oauth.js';
import { startRedis, type RedisHandle } from '../test/helpers/redis.js';
import { baseHeaders, closedLoop, median, openPath, type Path } from './load.js';
import { startBackend, startGateway, type Backend, type Gateway } from './processes.js';
import { processCpuUs } from './system.js';

const log = (line: string) => process.stderr.write(`[virtual ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function option(argv: string[], flag: string, fallback: number): number {
  const i = argv.indexOf(flag);
  return i < 0 ? fallback : Number(argv[i + 1]);
}

/** The same call under each path's name for the tool; the virtual one leaves the pinned argument out. */
const bodies: Record<string, (id: number) => string> = {
  '/mcp': (id) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"fast__echo","arguments":{"message":"hello, switchboard","lang":"en"}}}`,
  '/mcp/curated': (id) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"say","arguments":{"message":"hello, switchboard"}}}`,
  '/mcp/fast': (id) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, switchboard","lang":"en"}}}`,
};

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const rounds = option(argv, '--rounds', 12);
  const roundMs = option(argv, '--seconds', 2) * 1000;
  const connections = 16;
  let redis: RedisHandle | undefined;
  let oauth: OAuthHandle | undefined;
  let backend: Backend | undefined;
  let gateway: Gateway | undefined;
  const paths: Path[] = [];
  try {
    process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
    [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
    backend = await startBackend(false);
    const servers = [{ name: 'curated', tools: [{ from: 'fast.echo', as: 'say', arguments: { lang: { value: 'en' } } }] }];
    gateway = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], extra: { servers } });
    const headers = baseHeaders(await oauth.token({ sub: 'bench-user', aud: gateway.audience }));
    for (const path of Object.keys(bodies)) paths.push({ ...(await openPath(path, gateway.url, path, headers)), body: bodies[path] });
    log(`${rounds} rounds × ${roundMs / 1000} s per path, ${connections} connections; warming up`);
    for (let w = 0; w < 3; w++) for (const p of paths) await closedLoop(p, connections, { durationMs: 1500 });
    const cpu: number[][] = paths.map(() => []);
    const rate: number[][] = paths.map(() => []);
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [0, 1, 2] : [1, 0, 2];
      for (const i of order) {
        await sleep(100);
        const before = processCpuUs(gateway.child.pid);
        const res = await closedLoop(paths[i]!, connections, { durationMs: roundMs });
        if (res.errors) throw new Error(`${paths[i]!.label}: ${res.errors} failed calls (${res.firstError})`);
        cpu[i]!.push((processCpuUs(gateway.child.pid) - before) / res.calls);
        rate[i]!.push((res.calls * 1000) / res.elapsedMs);
      }
      log(`round ${r + 1}/${rounds}: ${paths.map((p, i) => `${p.label} ${cpu[i]!.at(-1)!.toFixed(0)} µs/call ${rate[i]!.at(-1)!.toFixed(0)}/s`).join(', ')}`);
    }
    const cpuRatio = median(cpu[1]!.map((c, r) => c / cpu[0]![r]!));
    const rateRatio = median(rate[1]!.map((c, r) => c / rate[0]![r]!));
    process.stdout.write(
      `virtual server vs /mcp (median per-round ratios, virtual ÷ /mcp; target: CPU per call ≤ 1.05)\n` +
        paths.map((p, i) => `  ${p.label.padEnd(14)} CPU per call ${median(cpu[i]!).toFixed(0)} µs, ${median(rate[i]!).toFixed(0)} calls/s\n`).join('') +
        `  CPU per call ratio ${cpuRatio.toFixed(3)} ${cpuRatio <= 1.05 ? '(within 5 %)' : '(OVER 5 %)'}; calls/s ratio ${rateRatio.toFixed(3)}\n`,
    );
  } finally {
    for (const p of paths) await p.pool.close().catch(() => {});
    await gateway?.child.stop().catch(() => {});
    await backend?.child.stop().catch(() => {});
    await Promise.allSettled([redis?.stop(), oauth?.stop()]);
  }
}

await main();
