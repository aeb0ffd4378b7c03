/**
 * The setup the policy tests share (issue 30): a real OAuth server, Redis, the bank backend of
 * both eras (test/fixtures/bank-backend.ts) as `bank` (2025-11-25) and `bank26` (2026-07-28),
 * a gateway in front of them, and a temp directory for the audit file.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConfigInput } from '../../src/config/schema.js';
import { startBankBackend, type BankBackend } from '../fixtures/bank-backend.js';
import { startGateway, type GatewayHandle } from './gateway.js';
import { startOAuthServer, type OAuthHandle } from './oauth.js';
import { startRedis, type RedisHandle } from './redis.js';

export interface BankGateway {
  oauth: OAuthHandle;
  gateway: GatewayHandle;
  /** The 2025-11-25 and the 2026-07-28 backend. */
  bank: BankBackend;
  bank26: BankBackend;
  /** `audit.jsonl` in the temp directory: give it as `audit.path`. */
  auditPath: string;
  /** The audit file's records, in order. */
  records(): Promise<Array<Record<string, unknown>>>;
  close(): Promise<void>;
}

export interface BankGatewayOptions {
  /** Backends besides `bank` and `bank26`, given the legacy bank's URL. */
  more?: (bankUrl: string) => ConfigInput['backends'];
  /** Top-level config (policy, audit), given the audit file's path. */
  overrides: (auditPath: string) => Partial<ConfigInput>;
}

export async function startBankGateway(options: BankGatewayOptions): Promise<BankGateway> {
  const [oauth, redis, bank, bank26, dir] = await Promise.all([startOAuthServer(), startRedis(), startBankBackend('legacy'), startBankBackend('modern'), mkdtemp(join(tmpdir(), 'sb-bank-'))]);
  const auditPath = join(dir, 'audit.jsonl');
  let gateway: GatewayHandle;
  const stopAll = async (redisHandle: RedisHandle) => {
    await Promise.allSettled([oauth.stop(), redisHandle.stop(), bank.close(), bank26.close()]);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    gateway = await startGateway({
      issuer: oauth.issuer,
      redisUrl: redis.url,
      backends: [{ name: 'bank', url: bank.url, protocol: '2025-11-25' }, { name: 'bank26', url: bank26.url, protocol: '2026-07-28' }, ...(options.more?.(bank.url) ?? [])],
      overrides: options.overrides(auditPath),
    });
  } catch (err) {
    await stopAll(redis);
    throw err;
  }
  return {
    oauth,
    gateway,
    bank,
    bank26,
    auditPath,
    async records() {
      const text = await readFile(auditPath, 'utf8').catch(() => '');
      return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    },
    async close() {
      await gateway.close();
      await stopAll(redis);
    },
  };
}
