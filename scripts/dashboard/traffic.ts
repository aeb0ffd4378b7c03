/**
 * What the users of scripts/dashboard-screenshot.ts do while Prometheus watches the gateway,
 * so that every panel of the chart's dashboard has something to show: SDK clients (real
 * sessions with their standalone streams) calling tools on a reference server — quick echoes
 * and slower operations for the latency panels — a backend that is down (backend errors),
 * a tool call a policy rule refuses, calls through a token-exchanging backend (including a
 * spell where the exchange server hangs), a tool whose definition changes midway (pinning),
 * sessions ended and opened again. Bounded: every loop stops at `until`, every call has a
 * deadline. Errors are expected here (they are what the error panels show) and only counted.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { setTimeout as sleep } from 'node:timers/promises';

const CALL_TIMEOUT_MS = 15_000;

export interface TrafficTarget {
  /** The gateway's base URL; backends are at `/mcp/<name>`. */
  gatewayUrl: string;
  /** Bearer tokens of the users, by name. */
  tokens: Record<string, string>;
}

/** Calls made and failed, by what they were. */
export type TrafficCounts = Record<string, { ok: number; failed: number }>;

class Session {
  readonly client = new Client({ name: 'dashboard-screenshot', version: '1.0.0' });
  readonly transport: StreamableHTTPClientTransport;

  constructor(target: TrafficTarget, backend: string, user: string) {
    this.transport = new StreamableHTTPClientTransport(new URL(`${target.gatewayUrl}/mcp/${backend}`), { requestInit: { headers: { Authorization: `Bearer ${target.tokens[user]}` } } });
    this.client.onerror = () => {};
  }

  async open(): Promise<this> {
    await this.client.connect(this.transport, { timeout: CALL_TIMEOUT_MS });
    return this;
  }

  call(name: string, args: Record<string, unknown>) {
    return this.client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
  }

  /** DELETE the session (the gateway counts it ended), then close the client. */
  async end(): Promise<void> {
    await this.transport.terminateSession().catch(() => {});
    await this.client.close().catch(() => {});
  }
}

/** Runs `work` and counts its outcome under `what`; a tool result with isError counts as failed. */
async function counted(counts: TrafficCounts, what: string, work: () => Promise<unknown>): Promise<void> {
  const entry = (counts[what] ??= { ok: 0, failed: 0 });
  try {
    const result = (await work()) as { isError?: boolean } | undefined;
    if (result?.isError) entry.failed++;
    else entry.ok++;
  } catch {
    entry.failed++;
  }
}

/** One user's loop on the reference server: echoes, sums, slower operations; a new session every `recycleMs`. */
async function everythingUser(target: TrafficTarget, user: string, until: number, counts: TrafficCounts, recycleMs: number): Promise<void> {
  while (Date.now() < until) {
    const session = await new Session(target, 'everything', user).open().catch(() => undefined);
    if (!session) {
      counts['open everything'] = { ok: 0, failed: (counts['open everything']?.failed ?? 0) + 1 };
      await sleep(1000);
      continue;
    }
    const end = Math.min(until, Date.now() + recycleMs);
    for (let i = 0; Date.now() < end; i++) {
      if (i % 7 === 3) await counted(counts, 'slow operation', () => session.call('trigger-long-running-operation', { duration: 0.2 + Math.random() * 0.8, steps: 2 }));
      else if (i % 5 === 1) await counted(counts, 'get-sum', () => session.call('get-sum', { a: i, b: 2 }));
      else await counted(counts, 'echo', () => session.call('echo', { message: `call ${i}` }));
      await sleep(100 + Math.random() * 200);
    }
    await session.end();
  }
}

/** Searches through a pinned backend, listing its tools on each new session (where a changed definition is seen); "secrets" is refused by a policy rule. */
async function catalogUser(target: TrafficTarget, user: string, until: number, counts: TrafficCounts): Promise<void> {
  while (Date.now() < until) {
    const session = await new Session(target, 'catalog', user).open().catch(() => undefined);
    if (session) {
      await counted(counts, 'catalog list', () => session.client.listTools(undefined, { timeout: CALL_TIMEOUT_MS }));
      for (let i = 0; i < 8 && Date.now() < until; i++) {
        await counted(counts, i % 4 === 0 ? 'search (denied by policy)' : 'search', () => session.call('search', { query: i % 4 === 0 ? 'secrets' : `item ${i}` }));
        await sleep(400 + Math.random() * 400);
      }
      await session.end();
    } else await sleep(1000);
  }
}

/** whoami through the exchanging backend: one token exchange per user, reused until its half-life. */
async function exchangeUser(target: TrafficTarget, user: string, until: number, counts: TrafficCounts): Promise<void> {
  while (Date.now() < until) {
    const session = await new Session(target, 'hr', user).open().catch(() => undefined);
    if (session) {
      for (let i = 0; i < 10 && Date.now() < until; i++) {
        await counted(counts, 'whoami (token exchange)', () => session.call('whoami', {}));
        await sleep(500 + Math.random() * 500);
      }
      await session.end();
    } else await sleep(1000);
  }
}

/** A client trying, every few seconds, a backend that is down. */
async function downUser(target: TrafficTarget, user: string, until: number, counts: TrafficCounts): Promise<void> {
  while (Date.now() < until) {
    await counted(counts, 'open down', async () => (await new Session(target, 'down', user).open()).end());
    await sleep(2000 + Math.random() * 2000);
  }
}

/** Every user's loops until `until`; resolves with the counts once all have stopped. */
export async function driveTraffic(target: TrafficTarget, until: number): Promise<TrafficCounts> {
  const counts: TrafficCounts = {};
  const users = Object.keys(target.tokens);
  await Promise.all(
    users.flatMap((user, i) => [
      everythingUser(target, user, until, counts, 15_000 + 5_000 * i),
      catalogUser(target, user, until, counts),
      exchangeUser(target, user, until, counts),
      ...(i === 0 ? [downUser(target, user, until, counts)] : []),
    ]),
  );
  return counts;
}
