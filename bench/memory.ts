/**
 * `node --import tsx bench/memory.ts [--streams K] [--users U] [--settle S] [--snapshot DIR] [--root DIR]`:
 * only the memory phase of `npm run bench` (bench/sessions.ts), for working on what a session
 * and an idle stream hold (issue 45 §3: 10,000 sessions of 100 users, each with an idle
 * standalone stream; ≤ 2 KB per idle session and ≤ 300 MB of gateway RSS, measured from
 * outside once a collection has settled: bench/settled-memory.ts). Starts Redis, the issuer,
 * the JSON fast backend and the default-configuration gateway (`node --import tsx
 * src/cli.ts`, as `npm start`); samples it idle, with the sessions and with the streams open.
 * `--settle S`: wait at most S seconds for each sample to settle (default 150). With
 * `--snapshot DIR`, the gateway writes a heap snapshot into DIR after each sample (open two
 * in Chrome DevTools, Memory, "Comparison"). `--root DIR`: run the gateway of another checkout
 * (`git worktree add DIR <commit>`), to measure a commit before a change the same way.
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { startOAuthServer } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { Redis } from 'ioredis';
import { baseHeaders } from './load.js';
import { removeConfigFile, startBackend, startGateway } from './processes.js';
import { SETTLE_BOUNDS } from './settled-memory.js';
import { measureIdleStreams, measureStoredSessions, memorySampler } from './sessions.js';

const argv = process.argv.slice(2);
const option = (flag: string, fallback: number) => (argv.includes(flag) ? Number(argv[argv.indexOf(flag) + 1]) : fallback);
const streams = option('--streams', 10_000);
const users = option('--users', 100);
const settleMs = option('--settle', SETTLE_BOUNDS.full.maxWaitMs / 1000) * 1000;
const snapshotDir = argv.includes('--snapshot') ? resolve(argv[argv.indexOf('--snapshot') + 1]!) : undefined;
const root = argv.includes('--root') ? `${resolve(argv[argv.indexOf('--root') + 1]!)}/` : undefined;

async function main(): Promise<void> {
  process.env.SWITCHBOARD_TEST_REDIS ??= 'binary';
  if (snapshotDir) mkdirSync(snapshotDir, { recursive: true });
  const [redis, oauth] = await Promise.all([startRedis(), startOAuthServer()]);
  const backend = await startBackend(false);
  const nodeArgs = snapshotDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : [];
  const gateway = await startGateway({ redisUrl: redis.url, issuer: oauth.issuer, backends: [backend], logLevel: 'default', nodeArgs, root });
  const stats = new Redis(redis.url);
  try {
    // One at a time: 100 token requests at once timed out at the issuer on a busy machine.
    const tokens: string[] = [];
    for (let i = 0; i < users; i++) tokens.push(await oauth.token({ sub: `bench-memory-user-${i}`, aud: gateway.audience }));
    const memory = memorySampler(gateway, { ...SETTLE_BOUNDS.full, maxWaitMs: settleMs }, snapshotDir);
    const idle = await memory.sample();
    const stored = await measureStoredSessions(gateway, tokens.map(baseHeaders), stats, streams);
    const result = await measureIdleStreams(gateway, memory, idle, tokens, stored.sessions, streams, undefined);
    process.stdout.write(`${JSON.stringify({ storedSessions: stored.result, idleStreams: result }, null, 2)}\n`);
  } finally {
    stats.disconnect();
    await Promise.allSettled([gateway.child.stop(), backend.child.stop(), oauth.stop(), redis.stop()]);
    removeConfigFile(gateway);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`memory failed: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);
