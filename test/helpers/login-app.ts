/**
 * A minimal app shaped like the gateway around the browser sign-in routes (JSON-only root,
 * JSON 404s): the routes, a store (a MemoryStore unless one is given), a config from
 * parseConfig, and a test-only `/whoami` that reports `sessions.current()`. For the sign-in
 * tests in test/connect/login*.test.ts.
 */
import { Writable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { parseConfig } from '../../src/config/load.js';
import type { Config, ConfigInput } from '../../src/config/schema.js';
import { createBrowserSessions, loginUrl, type BrowserSessions } from '../../src/browser/browser-sessions.js';
import { registerLoginRoutes } from '../../src/browser/login-routes.js';
import { connectionsPage, sendPage } from '../../src/browser/pages.js';
import { loggerOptions } from '../../src/ops/logger.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import type { StateStore } from '../../src/state/store.js';
import { freePort } from './free-port.js';

const COOKIE_KEY = 'c'.repeat(40);

export interface LoginApp {
  base: string;
  config: Config;
  app: FastifyInstance;
  sessions: BrowserSessions;
  logs: string[];
  close(): Promise<void>;
}

export interface WhoAmI {
  signedIn: boolean;
  iss?: string;
  sub?: string;
  label?: string;
}

/** The routes under test; `store` is closed with the app. */
export async function startLoginApp(o: { issuer: string; login?: ConfigInput['auth']['login'] | null; publicUrl?: string; listen?: boolean; store?: StateStore }): Promise<LoginApp> {
  const port = await freePort();
  const base = o.publicUrl ?? `http://127.0.0.1:${port}`;
  const config = parseConfig({
    publicUrl: base,
    auth: {
      issuer: o.issuer,
      audience: `${base}/mcp`,
      ...(o.login === null ? {} : { login: o.login ?? { clientId: 'switchboard-web', scopes: ['openid'] } }),
    },
    secrets: { cookieKey: COOKIE_KEY },
    backends: [{ name: 'demo', url: 'http://127.0.0.1:9/mcp' }],
  });
  const logs: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  const app = Fastify({ logger: { ...loggerOptions('info'), stream } });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error: 'not_found' }));
  const store = o.store ?? new MemoryStore();
  const sessions = createBrowserSessions(store, config);
  registerLoginRoutes(app, { config, store, sessions });
  app.get('/whoami', async (request): Promise<WhoAmI> => {
    const user = await sessions.current(request);
    return user ? { signedIn: true, iss: user.iss, sub: user.sub, label: user.label } : { signedIn: false };
  });
  // A real page with the real sign-out form (the gateway's /connections, minus the vault).
  app.get('/account', async (request, reply) => {
    const user = await sessions.current(request);
    if (!user) return reply.code(303).header('location', loginUrl('/account')).send();
    return sendPage(reply, connectionsPage({ accountLabel: user.label, connections: [], csrfToken: user.csrfToken }));
  });
  if (o.listen !== false) await app.listen({ port, host: '127.0.0.1' });
  else await app.ready();
  return {
    base,
    config,
    app,
    sessions,
    logs,
    async close() {
      await app.close();
      await store.close();
    },
  };
}

