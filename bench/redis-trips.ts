/**
 * Redis round trips per proxied call (issue 7's hot-path requirement: one at most), from a
 * sample of calls under `MONITOR`: commands sent by clients (round trips) are told from
 * those run inside Lua (`source = lua`). The rate limiter's background sync runs on a timer
 * for all users at once, not per message, and is counted apart.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { RATE_LIMIT_FLUSH as RATE_LIMIT_SYNC_SCRIPT } from '../src/state/redis-scripts.js';
import { closedLoop, type Path } from './load.js';
import { round, sleep } from './sampling.js';

const RATE_LIMIT_SYNC_SHA = createHash('sha1').update(RATE_LIMIT_SYNC_SCRIPT).digest('hex');

export interface RoundTrips {
  calls: number;
  roundTripsPerCall: number;
  backgroundPerCall: number;
  commandsPerCall: number;
  fromLuaPerCall: number;
  byCommand: Record<string, number>;
}

export async function measureRoundTrips(redisUrl: string, path: Path, calls: number): Promise<RoundTrips> {
  const monitorClient = new Redis(redisUrl, { lazyConnect: true });
  await monitorClient.connect();
  const monitor = await monitorClient.monitor();
  const count = { top: 0, lua: 0, background: 0 };
  let inBackgroundScript = false;
  const byCommand: Record<string, number> = {};
  const tally = (key: string) => (byCommand[key] = (byCommand[key] ?? 0) + 1);
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const cmd = (args[0] ?? '').toLowerCase();
    if (cmd === 'info') return;
    if (source !== 'lua') inBackgroundScript = (cmd === 'evalsha' && args[1] === RATE_LIMIT_SYNC_SHA) || (cmd === 'eval' && args[1] === RATE_LIMIT_SYNC_SCRIPT);
    if (inBackgroundScript) {
      if (source !== 'lua') count.background++;
      tally(source === 'lua' ? `rate-limit sync: ${cmd} (in Lua)` : 'rate-limit sync');
      return;
    }
    if (source === 'lua') count.lua++;
    else count.top++;
    tally(source === 'lua' ? `${cmd} (in Lua)` : cmd);
  });
  await sleep(100);
  const res = await closedLoop(path, 4, { count: calls });
  await sleep(300);
  monitor.disconnect();
  monitorClient.disconnect();
  const n = res.calls || 1;
  return {
    calls: res.calls,
    roundTripsPerCall: count.top / n,
    backgroundPerCall: count.background / n,
    commandsPerCall: (count.top + count.lua) / n,
    fromLuaPerCall: count.lua / n,
    byCommand: Object.fromEntries(Object.entries(byCommand).map(([k, v]) => [k, round(v / n, 3)!])),
  };
}
