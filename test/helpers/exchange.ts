/**
 * Starts the token-exchange fixtures (SPEC §8): the authorization server that speaks RFC 8693
 * and Entra's on-behalf-of grant (test/fixtures/exchange-server.ts), and a backend that
 * accepts only tokens exchanged for its audience (test/fixtures/exchange-backend.ts).
 */
import { fileURLToPath } from 'node:url';
import type { SeenExchange } from '../fixtures/exchange-server.js';
import { spawnChild } from './child.js';
import { nodeEntry } from './node-entry.js';

export type { SeenExchange };

const SERVER = fileURLToPath(new URL('../fixtures/exchange-server.ts', import.meta.url));
const BACKEND = fileURLToPath(new URL('../fixtures/exchange-backend.ts', import.meta.url));

export interface ExchangeServer {
  issuer: string;
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  exchanges(): Promise<SeenExchange[]>;
  /** `hang`: /token stops answering; `normal`: it answers again. */
  setMode(mode: 'hang' | 'normal'): Promise<void>;
  stop(): Promise<void>;
}

export interface ExchangeServerOptions {
  /** The gateway's identity provider: subject tokens are verified against its /jwks. */
  idpIssuer: string;
  /** Client authentication methods accepted and advertised (default both secret methods). */
  authMethods?: Array<'client_secret_basic' | 'client_secret_post'>;
  tokenTtlSeconds?: number;
}

export async function startExchangeServer(options: ExchangeServerOptions): Promise<ExchangeServer> {
  const clientId = 'switchboard';
  const clientSecret = 'exchange-client-secret';
  const child = await spawnChild({
    name: 'exchange server',
    command: process.execPath,
    args: nodeEntry(SERVER),
    env: {
      PORT: '0',
      IDP_ISSUER: options.idpIssuer,
      CLIENT_ID: clientId,
      CLIENT_SECRET: clientSecret,
      AUTH_METHODS: (options.authMethods ?? ['client_secret_basic', 'client_secret_post']).join(','),
      TOKEN_TTL: String(options.tokenTtlSeconds ?? 300),
      NODE_OPTIONS: '',
    },
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"issuer"'),
  });
  const issuer = (JSON.parse(child.readyLine!) as { issuer: string }).issuer;
  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    clientId,
    clientSecret,
    exchanges: async () => (await fetch(`${issuer}/exchanges`)).json() as Promise<SeenExchange[]>,
    setMode: async (mode) => {
      await fetch(`${issuer}/mode`, { method: 'POST', body: JSON.stringify({ mode }) }).then((r) => r.body?.cancel());
    },
    stop: () => child.stop(),
  };
}

export interface ExchangeBackend {
  url: string;
  /** Every Authorization header it received, in order. */
  seenAuthorizations(): Promise<string[]>;
  /** Refuse the next `count` POSTs of `method` with 401, good token or not. */
  reject(count: number, method: string): Promise<void>;
  stop(): Promise<void>;
}

export async function startExchangeBackend(exchangeIssuer: string, audience: string): Promise<ExchangeBackend> {
  const child = await spawnChild({
    name: `exchange backend (${audience})`,
    command: process.execPath,
    args: nodeEntry(BACKEND),
    env: { PORT: '0', EXCHANGE_ISSUER: exchangeIssuer, AUDIENCE: audience, NODE_OPTIONS: '' },
    ready: (line, stream) => stream === 'stdout' && line.startsWith('{"url"'),
  });
  const url = (JSON.parse(child.readyLine!) as { url: string }).url;
  return {
    url,
    seenAuthorizations: async () => (await fetch(new URL('/seen-authorizations', url))).json() as Promise<string[]>,
    reject: async (count, method) => {
      await fetch(new URL('/reject', url), { method: 'POST', body: JSON.stringify({ count, method }) }).then((r) => r.body?.cancel());
    },
    stop: () => child.stop(),
  };
}

/** The exchanges of one user (by `sub`) that succeeded. */
export function exchangesOf(all: SeenExchange[], sub: string): SeenExchange[] {
  return all.filter((e) => e.sub === sub && e.outcome === 'ok');
}
