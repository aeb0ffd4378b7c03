/**
 * The processes of a bench run (bench/run.ts) and of a comparison (bench/compare.ts): the
 * minimal backend, the naive pass-through and Switchboard itself. Each returns the child's
 * handle, which the caller stops (the backend and the pass-through also exit when their stdin closes).
 */
import { NATIVE_BACKEND } from './stateless.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnChild, waitUntil, type ChildHandle } from '../test/helpers/child.js';
import { freePort } from '../test/helpers/free-port.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface Backend {
  child: ChildHandle;
  port: number;
  sse: boolean;
  /** The gateway's name for it; default `fast` (JSON) or `fast-sse`. */
  name?: string;
}

/** The collector: a real OTLP/HTTP receiver that keeps nothing (bench/otlp-sink.ts), and its base URL. */
export async function startOtlpSink(): Promise<{ child: ChildHandle; url: string }> {
  const child = await spawnChild({
    name: 'otlp sink',
    command: process.execPath,
    args: ['--import', 'tsx', join(ROOT, 'bench', 'otlp-sink.ts')],
    cwd: ROOT,
    stdin: 'pipe',
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"port":'),
  });
  return { child, url: `http://127.0.0.1:${(JSON.parse(child.readyLine!) as { port: number }).port}` };
}

/** The minimal backend (bench/fast-backend.ts); `split`: head and body of each answer in two writes. */
export async function startBackend(sse: boolean, split = false, answer?: 'chunked' | 'sse-one' | 'sse-progress'): Promise<Backend> {
  const child = await spawnChild({
    name: answer ? `fast backend (${answer})` : sse ? 'fast backend (SSE)' : 'fast backend (JSON)',
    command: process.execPath,
    args: ['--import', 'tsx', join(ROOT, 'bench', 'fast-backend.ts'), ...(sse ? ['--sse'] : []), ...(split ? ['--split'] : []), ...(answer ? ['--answer', answer] : [])],
    cwd: ROOT,
    stdin: 'pipe',
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"port":'),
  });
  const port = (JSON.parse(child.readyLine!) as { port: number }).port;
  return { child, port, sse };
}

/** The naive pass-through (bench/naive-proxy.ts) in front of one backend: the reference. */
export async function startNaiveProxy(backend: Backend): Promise<{ child: ChildHandle; port: number }> {
  const child = await spawnChild({
    name: `naive proxy (${backend.sse ? 'SSE' : 'JSON'})`,
    command: process.execPath,
    args: ['--import', 'tsx', join(ROOT, 'bench', 'naive-proxy.ts'), '--backend', `http://127.0.0.1:${backend.port}/mcp`],
    cwd: ROOT,
    stdin: 'pipe',
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"port":'),
  });
  return { child, port: (JSON.parse(child.readyLine!) as { port: number }).port };
}

/**
 * The gateway as built (`dist/cli.js`, what the image runs) under another program — valgrind
 * for bench/instructions.ts — with extra Node flags. Starting takes minutes then.
 */
export interface GatewayWrap {
  /** The program and its arguments, before `node`. */
  command: string[];
  nodeArgs?: string[];
}

export interface Gateway {
  child: ChildHandle;
  port: number;
  url: string;
  audience: string;
  configFile: string;
}

/**
 * Starts Switchboard from its CLI with a generated config (Redis store, the issuer, the
 * backends as `fast` / `fast-sse`). `root` is the checkout whose src/cli.ts runs: the working
 * tree, or another commit's worktree when comparing (bench/compare.ts). `logLevel`: a level,
 * `default` for the shipped one (no `log` block), unset for `silent`; the child's stdout is
 * read by this process into a bounded log (test/helpers/child.ts), as a log collector would.
 * `nodeArgs`: more Node flags (bench/memory.ts: `--heapsnapshot-signal`). `built`: run `root`'s
 * `dist/cli.js`, as the image does (`npm run build` first), not its src/cli.ts through tsx,
 * whose transform adds a `__name` call to each function made at run time.
 */
export async function startGateway(opts: { redisUrl?: string; redis?: Record<string, unknown>; issuer: string; backends: Backend[]; profileDir?: string; root?: string; logLevel?: string; wrap?: GatewayWrap; extra?: Record<string, unknown>; nodeArgs?: string[]; built?: boolean }): Promise<Gateway> {
  const root = opts.root ?? ROOT;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const audience = `${url}/mcp`;
  const config = {
    publicUrl: url,
    listen: { host: '127.0.0.1', port },
    // `redis` is a whole block (e.g. cluster mode, bench/cluster.ts); else standalone at redisUrl.
    redis: { ...(opts.redis ?? { url: opts.redisUrl }), keyPrefix: 'sb:' },
    auth: { issuer: opts.issuer, audience, algorithms: ['RS256', 'ES256'] },
    // 'default': no `log` block, the level the gateway ships with (info). Unset: silent.
    log: opts.logLevel === 'default' ? undefined : { level: opts.logLevel ?? 'silent' },
    // One bench user makes thousands of calls a second: the per-user rate limit stays on (its
    // Redis round trip is part of what is measured) but far above what the bench can reach.
    limits: { rateLimit: process.env.BENCH_NO_RATE_LIMIT ? { enabled: false } : { max: 1_000_000_000 } },
    // The idle-streams figure opens 10,000 sessions and streams for that one user: its per-user
    // shares (issue 13) are raised past it, as an operator would for one heavy service account.
    sessions: { maxPerUser: 1_000_000 },
    streams: { maxPerUser: 1_000_000 },
    // The JSON backend is also reached as a 2026-07-28 one (bench/stateless.ts).
    backends: opts.backends.flatMap((b) => {
      const entry = { name: b.name ?? (b.sse ? 'fast-sse' : 'fast'), url: `http://127.0.0.1:${b.port}/mcp` };
      return b.sse || b.name ? [entry] : [entry, { name: NATIVE_BACKEND, url: entry.url, protocol: '2026-07-28' }];
    }),
    // More top-level keys for one figure (e.g. `servers`, bench/virtual.ts).
    ...opts.extra,
  };
  // In a directory of its own: the gateway watches its file's directory (src/reload/config-watch.ts),
  // and `/tmp` holds files written all the time during a run (audit trails, V8's JIT maps).
  const configFile = join(mkdtempSync(join(tmpdir(), 'switchboard-bench-')), 'switchboard.yaml');
  // JSON is YAML.
  writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`);
  // Nothing is attached for the memory measurement: it reads the process from outside (bench/settled-memory.ts).
  const nodeArgs = [...(opts.profileDir ? ['--cpu-prof', '--cpu-prof-dir', opts.profileDir] : []), ...(opts.wrap?.nodeArgs ?? []), ...(opts.nodeArgs ?? [])];
  const entry = opts.wrap || opts.built ? [join(root, 'dist', 'cli.js')] : ['--import', 'tsx', join(root, 'src', 'cli.ts')];
  const command = opts.wrap ? [...opts.wrap.command, process.execPath] : [process.execPath];
  const child = await spawnChild({
    name: 'switchboard',
    command: command[0]!,
    args: [...command.slice(1), ...nodeArgs, ...entry, '--config', configFile],
    cwd: root,
    // A graceful exit is what writes the CPU profile.
    stopGraceMs: 30_000,
  });
  await waitUntil(
    async () => {
      if (child.exit) throw new Error(`switchboard exited (${JSON.stringify(child.exit)})`);
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return res.status === 200 ? true : undefined;
    },
    { what: `switchboard /readyz on ${url}`, timeoutMs: opts.wrap ? 300_000 : 90_000, intervalMs: 100, details: () => child.logs() },
  );
  return { child, port, url, audience, configFile };
}

/** Removes the config file {@link startGateway} wrote, and its directory. */
export function removeConfigFile(gateway: Pick<Gateway, 'configFile'>): void {
  rmSync(dirname(gateway.configFile), { recursive: true, force: true });
}
