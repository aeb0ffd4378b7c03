/**
 * Runs the conformance client fixture's journeys in the test's own process (issue 43). The
 * suite starts a command per scenario; that command (test/fixtures/conformance-client-shim.mjs)
 * POSTs its arguments and environment to `/journeys` here and exits as the journey ended. A
 * fixture process of its own cost each scenario about 2 s of CPU to start and import the
 * gateway, both SDKs and playwright-core: 56 scenarios per run.
 *
 * Loopback only, one journey at a time (the suite runs one scenario at a time); a journey whose
 * command is gone (the suite's timeout) still runs to its end, and is awaited at `stop`.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { runGatewayJourney, scenarioInput, type SharedParts } from '../fixtures/conformance-journey.js';

export interface FixtureHost {
  /** CONFORMANCE_FIXTURE_HOST for the shim. */
  url: string;
  stop(): Promise<void>;
}

async function readJson(req: IncomingMessage): Promise<{ argv: string[]; env: Record<string, string | undefined> }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as { argv: string[]; env: Record<string, string | undefined> };
}

export async function startFixtureHost(shared: SharedParts): Promise<FixtureHost> {
  const running = new Set<Promise<void>>();
  const server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/journeys') {
      res.writeHead(404).end();
      return;
    }
    const journey = (async () => {
      const lines: string[] = [];
      const log = (message: string) => void lines.push(`[gateway-client] ${message}\n`);
      // The gateway's own log (CONFORMANCE_GATEWAY_LOG) joins the journey's, as a process's stderr would.
      const logStream = new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString('utf8')), done()) });
      let ok = false;
      try {
        const { argv, env } = await readJson(req);
        await runGatewayJourney(scenarioInput(argv, env), shared, log, logStream);
        ok = true;
      } catch (err) {
        log(`failed: ${err instanceof Error ? err.message : String(err)}`);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok, log: lines.join('') }));
    })();
    running.add(journey);
    void journey.finally(() => running.delete(journey));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: async () => {
      await Promise.allSettled(running);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
