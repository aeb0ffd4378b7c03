/**
 * `node --import tsx bench/memory.ts [--streams K] [--users U] [--snapshot DIR]`: only the memory
 * phase of `npm run bench` (bench/sessions.ts), for working on what a session and an idle
 * stream hold (issue 29: 10,000 sessions of 100 users, each with an idle standalone stream,
 * gateway RSS ≤ 300 MB measured from outside). Starts Redis, the issuer, the JSON fast backend
 * and the default-configuration gateway; samples RSS and heap (after forced GC) idle, with the
 * sessions and with the streams open. With `--snapshot DIR`, also writes a heap snapshot of the
 * gateway at each of the three points (open them in Chrome DevTools, Memory, "Comparison").
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { Redis } from 'ioredis';
import { baseHeaders } from './load.js';
import { startBackend, startGateway } from './processes.js';
import { log } from './sampling.js';
import { measureIdleStreams, measureStoredSessions, memorySampler } from './sessions.js';

const argv = process.argv.slice(2);
const option = (flag: string, fallback: number) => (argv.includes(flag) ? Number(argv[argv.indexOf(flag) + 1]) : fallback);
const streams = option('--streams', 10_000);
const users = option('--users', 100);
const snapshotDir = argv.includes('--snapshot') ? argv[argv.indexOf('--snapshot') + 1] : undefined;

async function main(): Promise<void> {
  process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
  const [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
  const backend = await startBackend(false);
  const gateway = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], logLevel: 'default' });
  const stats = new Redis(redis.url);
  try {
    const tokens = await Promise.all(Array.from({ length: users }, (_, i) => oauth.token({ sub: `bench-memory-user-${i}`, aud: gateway.audience })));
    const memory = await memorySampler(gateway);
    const snapshot = async (name: string) => {
      if (!snapshotDir) return;
      const file = join(snapshotDir, `gateway-${name}.heapsnapshot`);
      await memory.writeHeapSnapshot(file);
      log(`heap snapshot: ${file}`);
    };
    const idle = await memory.sample();
    await snapshot('idle');
    const stored = await measureStoredSessions(gateway, tokens.map(baseHeaders), stats, streams);
    const sampler = { ...memory, sample: async () => (await snapshot(`sessions-${Date.now()}`), memory.sample()) };
    const result = await measureIdleStreams(gateway, snapshotDir ? sampler : memory, idle, tokens, stored.sessions, streams, undefined);
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } finally {
    stats.disconnect();
    await Promise.allSettled([gateway.child.stop(), backend.child.stop(), oauth.stop(), redis.stop()]);
    rmSync(gateway.configFile, { force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`memory failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
