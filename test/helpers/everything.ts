/**
 * Starts `@modelcontextprotocol/server-everything` (the MCP reference server
 * that exercises every protocol feature) over Streamable HTTP, as a real
 * upstream for the gateway in integration tests.
 *
 * How it is started (from its dist/index.js and dist/transports/streamableHttp.js):
 *  - the first CLI argument picks the transport: `stdio` (default), `sse`,
 *    `streamableHttp`;
 *  - the port comes from env `PORT` (default 3001); it serves POST/GET/DELETE
 *    on `/mcp`; it logs "MCP Streamable HTTP Server listening on port N" to
 *    stderr once listening;
 *  - it calls `app.listen(PORT)` without a host, i.e. on ALL interfaces. To
 *    keep tests loopback-only we preload a tiny module (`--import data:…`)
 *    that gives a host-less `listen(port)` the host 127.0.0.1;
 *  - it only handles SIGINT itself; SIGTERM (our stop) simply ends it.
 *
 * Ready means: an MCP `initialize` POST returns a result (the probe session is
 * DELETEd afterwards so it leaves nothing behind).
 */
import { fileURLToPath } from 'node:url';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { GiveUp, spawnChild, waitUntil, describeLogs } from './child.js';
import { freePort } from './free-port.js';
import { LOOPBACK_PRELOAD_URL as PRELOAD_URL } from '../../src/dev/loopback-preload.js';

/** A running server-everything. */
export interface EverythingHandle {
  /** MCP endpoint, e.g. `http://127.0.0.1:40123/mcp`. */
  url: string;
  /** SIGTERM (then SIGKILL) the server. Idempotent. */
  stop(): Promise<void>;
}

const ENTRY = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const LISTEN_TIMEOUT_MS = 20_000;
const PROBE_TIMEOUT_MS = 10_000;
const PROBE_REQUEST_MS = 3_000;
const HOST = '127.0.0.1';


/** Spawns server-everything on a free loopback port and waits until it answers `initialize`. */
export async function startEverything(): Promise<EverythingHandle> {
  const port = await freePort();
  const url = `http://${HOST}:${port}/mcp`;
  const child = await spawnChild({
    name: 'server-everything',
    command: process.execPath,
    args: ['--import', PRELOAD_URL, ENTRY, 'streamableHttp'],
    cwd: ROOT,
    env: { PORT: String(port) },
    readyTimeoutMs: LISTEN_TIMEOUT_MS,
    ready: (line) => line.includes('listening on port'),
  });
  try {
    await waitUntil(
      async () => {
        if (child.exit) throw new GiveUp(`server-everything exited (code ${child.exit.code}, signal ${child.exit.signal})`);
        return (await probeInitialize(url)) ? true : undefined;
      },
      { what: `MCP initialize on ${url}`, timeoutMs: PROBE_TIMEOUT_MS, intervalMs: 200 },
    );
  } catch (err) {
    await child.stop().catch(() => undefined);
    throw new Error(`${(err as Error).message}\n${describeLogs('server-everything', child.logs())}`);
  }
  return { url, stop: () => child.stop() };
}

/**
 * One `initialize` round trip. The answer may be JSON or an SSE stream (the
 * server's default); either way the body contains the JSON-RPC result.
 */
async function probeInitialize(url: string): Promise<boolean> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: 'switchboard-test-probe', version: '0.0.0' },
      },
    }),
    signal: AbortSignal.timeout(PROBE_REQUEST_MS),
  });
  const body = await res.text();
  const sessionId = res.headers.get('mcp-session-id');
  if (sessionId) {
    await fetch(url, {
      method: 'DELETE',
      headers: { 'mcp-session-id': sessionId, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
      signal: AbortSignal.timeout(PROBE_REQUEST_MS),
    })
      .then((r) => r.body?.cancel())
      .catch(() => undefined);
  }
  if (!res.ok) throw new Error(`initialize answered HTTP ${res.status}: ${body.slice(0, 500)}`);
  if (!body.includes('"protocolVersion"')) throw new Error(`initialize answer has no result: ${body.slice(0, 500)}`);
  return true;
}
