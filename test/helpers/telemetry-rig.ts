/**
 * One gateway (in process) with telemetry exporting to a real OTLP/HTTP receiver process
 * (test/fixtures/otlp-receiver.ts), on a real redis and OAuth server, in front of the traced
 * SDK backend `weather` (test/fixtures/traced-backend.ts): the rig of the telemetry tests that
 * need one gateway rather than the replicas.
 */
import type { Recorded } from '../fixtures/otlp-receiver.js';
import { startTracedBackend, type TracedBackend } from '../fixtures/traced-backend.js';
import { startFixtureChild, type FixtureChild } from './fixture-child.js';
import { startGateway, type GatewayHandle, type GatewayOptions } from './gateway.js';
import { startOAuthServer, type OAuthHandle } from './oauth.js';
import { startRedis, type RedisHandle } from './redis.js';

export interface TelemetryRig {
  receiver: FixtureChild;
  oauth: OAuthHandle;
  backend: TracedBackend;
  gateway: GatewayHandle;
  /** A token of `sub` alice for the gateway. */
  token(): Promise<string>;
  /** Closes the gateway (its shutdown flushes the exports), once. */
  closeGateway(): Promise<void>;
  /** What the receiver got so far. */
  recorded(): Promise<Recorded>;
  stop(): Promise<void>;
}

/** `overrides(receiverUrl)`: the config keys over the generated ones (telemetry, audit, policy). */
export async function startTelemetryRig(overrides: (receiverUrl: string) => GatewayOptions['overrides']): Promise<TelemetryRig> {
  let redis: RedisHandle | undefined;
  const [receiver, oauth, backend] = await Promise.all([startFixtureChild('otlp-receiver.ts'), startOAuthServer(), startTracedBackend('legacy')]);
  redis = await startRedis();
  const gateway = await startGateway({ issuer: oauth.issuer, redisUrl: redis.url, backends: [{ name: 'weather', url: backend.url, protocol: '2025-11-25' }], overrides: overrides(receiver.url) });
  let closed: Promise<void> | undefined;
  const closeGateway = () => (closed ??= gateway.close());
  return {
    receiver,
    oauth,
    backend,
    gateway,
    token: () => oauth.token({ sub: 'alice', aud: gateway.audience, scope: 'mcp' }),
    closeGateway,
    recorded: async () => (await (await fetch(`${receiver.url}/recorded`)).json()) as Recorded,
    stop: async () => {
      await closeGateway();
      await Promise.allSettled([receiver.child.stop(), oauth.stop(), redis?.stop(), backend.close()]);
    },
  };
}
