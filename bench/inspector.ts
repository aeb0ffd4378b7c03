/**
 * A minimal client for a child's V8 inspector, used only by the memory measurement: it
 * forces garbage collection in the gateway before each RSS sample (otherwise the garbage
 * left by creating thousands of sessions hides the memory the streams hold) and reads
 * `process.memoryUsage()` there.
 *
 * The gateway is started with `--inspect-port=127.0.0.1:<port>`, which only reserves the
 * port; the inspector is switched on later with SIGUSR1, so the throughput and latency
 * rounds run without it.
 */
import { WebSocket } from 'undici';

export interface Inspector {
  collectGarbage(): Promise<void>;
  memoryUsage(): Promise<NodeJS.MemoryUsage>;
  /** Writes a V8 heap snapshot of the gateway to `file` (bench/memory.ts `--snapshot`). */
  writeHeapSnapshot(file: string): Promise<void>;
  close(): void;
}

export async function attachInspector(pid: number, port: number, timeoutMs = 10_000): Promise<Inspector> {
  process.kill(pid, 'SIGUSR1');
  const deadline = Date.now() + timeoutMs;
  let wsUrl: string | undefined;
  let lastError: unknown;
  while (!wsUrl && Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(1000) });
      const targets = (await res.json()) as Array<{ webSocketDebuggerUrl?: string }>;
      wsUrl = targets.find((t) => t.webSocketDebuggerUrl)?.webSocketDebuggerUrl;
    } catch (err) {
      lastError = err;
    }
    if (!wsUrl) await new Promise((r) => setTimeout(r, 100));
  }
  if (!wsUrl) throw new Error(`the gateway's inspector did not come up on port ${port}: ${(lastError as Error)?.message ?? 'no target'}`);

  const ws = new WebSocket(wsUrl);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve(), { once: true });
    ws.addEventListener('error', () => reject(new Error(`cannot connect to ${wsUrl}`)), { once: true });
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  ws.addEventListener('message', (event) => {
    const msg = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (msg.id === undefined) return;
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(new Error(msg.error.message));
    else p.resolve(msg.result);
  });
  const send = (method: string, params: Record<string, unknown> = {}): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`inspector ${method} timed out`));
      }, 120_000);
      pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      ws.send(JSON.stringify({ id, method, params }));
    });

  return {
    async collectGarbage() {
      await send('HeapProfiler.collectGarbage');
    },
    async memoryUsage() {
      const result = (await send('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true })) as {
        result: { value: string };
      };
      return JSON.parse(result.result.value) as NodeJS.MemoryUsage;
    },
    async writeHeapSnapshot(file: string) {
      await send('Runtime.evaluate', { expression: `process.getBuiltinModule('v8').writeHeapSnapshot(${JSON.stringify(file)})`, returnByValue: true });
    },
    close() {
      ws.close();
    },
  };
}
