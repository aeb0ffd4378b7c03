/**
 * The processes of the stdio phase (bench/stdio.ts): the SDK echo server (bench/stdio-echo.ts)
 * on Streamable HTTP as the direct reference, and the same file as the stdio child of each
 * proxy — this gateway (and, with `--baseline`, another checkout of it, e.g. the loopback
 * bridge before issue 44), mcp-proxy and supergateway. Also the CPU time of a whole process
 * tree from /proc: a proxy's cost is its own and its child's.
 *
 * The peers are references, never dependencies of the product: bench/peers/package.json pins
 * them, and they are installed on demand into bench/peers/node_modules (ignored by git) with
 * the ordinary npm client. When that is not possible (no registry), the phase goes on without
 * them and says so.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnChild, waitUntil, type ChildHandle } from '../test/helpers/child.js';
import { freePort } from '../test/helpers/free-port.js';
import type { OAuthHandle } from '../test/helpers/oauth.js';
import { baseHeaders, openPath, type Path } from './load.js';
import { startGateway } from './processes.js';
import { log } from './sampling.js';
import { processCpuUs } from './system.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const ECHO = join(ROOT, 'bench', 'stdio-echo.ts');
const PEERS = join(ROOT, 'bench', 'peers');
/** Absolute, so a child started from any folder loads TypeScript. */
const TSX = import.meta.resolve('tsx');
/** The echo server as a stdio child: the same command line for every proxy. */
export const ECHO_COMMAND = [process.execPath, '--import', TSX, ECHO];

/** One way to the echo tool: its load path and the process whose tree does the work. */
export interface StdioPath {
  label: string;
  path: Path;
  child: ChildHandle;
  /** True for a proxy (its added latency is measured against the direct path). */
  proxy: boolean;
}

/** The SDK echo server on Streamable HTTP, spoken to directly. */
export async function startDirect(): Promise<StdioPath> {
  const child = await spawnChild({
    name: 'sdk echo (Streamable HTTP)',
    command: process.execPath,
    args: ['--import', TSX, ECHO, '--http'],
    cwd: ROOT,
    stdin: 'pipe',
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"port":'),
  });
  const { port } = JSON.parse(child.readyLine!) as { port: number };
  const path = await openPath('direct', `http://127.0.0.1:${port}`, '/mcp', baseHeaders('unused'));
  return { label: 'SDK server on Streamable HTTP, direct', path, child, proxy: false };
}

/** Switchboard from its CLI (the default log level, no Redis) with the echo server as stdio backend `echo`. */
export async function startSwitchboard(label: string, oauth: OAuthHandle, root?: string): Promise<StdioPath> {
  const backends = [{ name: 'echo', transport: 'stdio', command: ECHO_COMMAND[0], args: ECHO_COMMAND.slice(1), timeout: '30s' }];
  // stdio backends are single-replica: no `redis` (JSON.stringify drops the undefined).
  const gw = await startGateway({ issuer: oauth.issuer, backends: [], logLevel: 'default', root, extra: { redis: undefined, backends } });
  const token = await oauth.token({ sub: 'bench-user', aud: gw.audience });
  const path = await openPath(label, gw.url, '/mcp/echo', baseHeaders(token));
  return { label, path, child: gw.child, proxy: true };
}

/** mcp-proxy: its Streamable HTTP endpoint, stateful (a child per session). */
export async function startMcpProxy(): Promise<StdioPath> {
  const port = await freePort();
  const bin = peerBin('mcp-proxy');
  const child = await spawnChild({ name: 'mcp-proxy', command: process.execPath, args: [bin, '--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', ...ECHO_COMMAND], cwd: PEERS });
  return { label: `mcp-proxy ${peerVersion('mcp-proxy')}`, path: await openWhenUp('mcp-proxy', child, port), child, proxy: true };
}

/** supergateway: stdio → Streamable HTTP, stateful (a child per session); `quiet` is `--logLevel none`. */
export async function startSupergateway(quiet: boolean): Promise<StdioPath> {
  const port = await freePort();
  const bin = peerBin('supergateway');
  const args = [bin, '--stdio', ECHO_COMMAND.join(' '), '--outputTransport', 'streamableHttp', '--stateful', '--port', String(port), '--streamableHttpPath', '/mcp', ...(quiet ? ['--logLevel', 'none'] : [])];
  const child = await spawnChild({ name: 'supergateway', command: process.execPath, args, cwd: PEERS });
  const label = `supergateway ${peerVersion('supergateway')}${quiet ? ', --logLevel none' : ', default logging'}`;
  return { label, path: await openWhenUp('supergateway', child, port), child, proxy: true };
}

/** Opens a session once the proxy listens (neither prints a line to wait for that all versions share). */
async function openWhenUp(name: string, child: ChildHandle, port: number): Promise<Path> {
  return waitUntil(
    async () => {
      if (child.exit) throw new Error(`${name} exited (${JSON.stringify(child.exit)}): ${child.logs()}`);
      return openPath(name, `http://127.0.0.1:${port}`, '/mcp', baseHeaders('unused')).catch(() => undefined);
    },
    { what: `${name} on port ${port}`, timeoutMs: 60_000, intervalMs: 200, details: () => child.logs() },
  );
}

/**
 * Installs the peers into bench/peers/node_modules unless they are there; false (said in the
 * log) when npm cannot.
 */
export function ensurePeers(): boolean {
  if (['mcp-proxy', 'supergateway'].every((p) => existsSync(join(PEERS, 'node_modules', p, 'package.json')))) return true;
  log('installing the peers (bench/peers/package.json) with npm into bench/peers/node_modules');
  try {
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-save'], { cwd: PEERS, stdio: 'inherit', timeout: 300_000 });
    return true;
  } catch (err) {
    log(`WARNING the peers could not be installed (${(err as Error).message}); comparing with the direct SDK server only`);
    return false;
  }
}

function peerPackage(name: string): { version: string; bin: string | Record<string, string> } {
  return JSON.parse(readFileSync(join(PEERS, 'node_modules', name, 'package.json'), 'utf8')) as { version: string; bin: string | Record<string, string> };
}

function peerVersion(name: string): string {
  return peerPackage(name).version;
}

/** The file a peer's command runs (its package.json `bin`). */
function peerBin(name: string): string {
  const { bin } = peerPackage(name);
  return join(PEERS, 'node_modules', name, typeof bin === 'string' ? bin : bin[name]!);
}

/** The pids of `root` and every process below it, from /proc (children of children included). */
export function treePids(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      // The process ended while the list was read.
    }
  }
  const out: number[] = [];
  for (const queue = [root]; queue.length > 0; ) {
    const pid = queue.pop()!;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** CPU time so far (µs) of a process tree: the process and everything it started that still runs. */
export function treeCpuUs(pids: readonly number[]): number {
  let sum = 0;
  for (const pid of pids) {
    try {
      sum += processCpuUs(pid);
    } catch {
      // Gone: its time is no longer readable (the trees are measured while their sessions are open).
    }
  }
  return sum;
}
