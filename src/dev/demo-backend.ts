/**
 * The demo backend of the embedded development default (SPEC §3): the MCP reference
 * server `@modelcontextprotocol/server-everything` over Streamable HTTP, started as a
 * child process on a free loopback port and stopped with the gateway.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { LOOPBACK_PRELOAD_URL } from './loopback-preload.js';

export interface DemoBackend {
  url: string;
  stop(): Promise<void>;
}

export async function startDemoBackend(timeoutMs = 20_000): Promise<DemoBackend> {
  const entry = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
  const port = await freeLoopbackPort();
  const child = spawn(process.execPath, ['--import', LOOPBACK_PRELOAD_URL, entry, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stopChild = () => child.kill('SIGKILL');
  process.once('exit', stopChild);
  await waitForListening(child, timeoutMs);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    stop: async () => {
      process.off('exit', stopChild);
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function waitForListening(child: ChildProcess, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => fail(new Error(`demo backend did not start within ${timeoutMs} ms: ${output.slice(-500)}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4_000);
      if (/listening on port/i.test(output)) done();
    };
    const onExit = (code: number | null) => fail(new Error(`demo backend exited (code ${code}): ${output.slice(-500)}`));
    const cleanup = () => {
      clearTimeout(timer);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      // Keep draining its stderr so the child never blocks on a full pipe.
      child.stderr?.resume();
    };
    const done = () => {
      cleanup();
      resolve();
    };
    const fail = (err: Error) => {
      cleanup();
      child.kill('SIGKILL');
      reject(err);
    };
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
