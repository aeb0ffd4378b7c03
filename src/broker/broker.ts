/**
 * Broker mode wiring (SPEC §8; `auth.mode: broker`): what app.ts needs, in two steps.
 *
 * `prepareBroker` (before anything else is built) loads the signing keys, fills random
 * `secrets` for a single replica that configured none (the consent pages and `/login` must
 * share the cookie key), and gives the token verifier its options: issuer `publicUrl`, the
 * broker's own public keys (no network fetch on the hot path), the gateway's audiences, and
 * the upstream issuer as the identity the token's `sub` belongs to — so a user is the same
 * user (`userKey`) in both modes, and the connect page's browser session matches.
 *
 * `register` mounts the authorization server (provider.ts, mount.ts) and its pages
 * (interaction-routes.ts).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance, onRequestHookHandler } from 'fastify';
import { allAudiences } from '../auth/resources.js';
import type { TokenVerifierOptions } from '../auth/token-verifier.js';
import type { Config } from '../config/schema.js';
import { derived } from '../config/live-config.js';
import { createBrowserSessions } from '../browser/browser-sessions.js';
import type { RateLimitStore } from '../state/rate-limit-store.js';
import type { StateStore } from '../state/store.js';
import { createClientMetadataDocuments } from './client-metadata-documents.js';
import { defaultAuthorizationScope } from './default-scope.js';
import { createGrantClaims, policyClaimNames } from './grant-claims.js';
import { registerInteractionRoutes } from './interaction-routes.js';
import { mountProvider } from './mount.js';
import { createBrokerProvider } from './provider.js';
import { registeredClientName } from './store-adapter.js';
import { loadSigningKeys } from './signing-keys.js';

export interface Broker {
  /** The config to build the app with: `secrets` filled in when a single replica set none. */
  config: Config;
  verifierOptions: TokenVerifierOptions;
  register(app: FastifyInstance, deps: { store: StateStore; originGuard: onRequestHookHandler; rateCounter: RateLimitStore }): void;
  /** A dynamically registered client's `client_name`, for the approval page (issue 46 §3); undefined when unknown or unnamed. */
  clientName(store: StateStore, clientId: string): Promise<string | undefined>;
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** undefined in resource-server mode. */
export async function prepareBroker(given: Config, log: FastifyBaseLogger): Promise<Broker | undefined> {
  if (given.auth.mode !== 'broker') return undefined;
  const keys = await loadSigningKeys(given.auth.broker.signingKeys);
  if (keys.generated) log.warn('auth.broker.signingKeys not set: a key was generated for this process, so run one replica only (its tokens end with it)');
  const config = withSecrets(given, log);
  return {
    config,
    verifierOptions: {
      issuer: config.publicUrl,
      identityIssuer: config.auth.issuer,
      audience: derived(config, allAudiences),
      algorithms: keys.algorithms,
      clockToleranceMs: config.auth.clockTolerance,
      keySet: keys.keySet,
      typ: 'at+jwt',
    },
    register(app, { store, originGuard, rateCounter }) {
      const grantClaims = createGrantClaims(store);
      const documents = config.auth.broker.clientIdMetadataDocuments
        ? createClientMetadataDocuments(store, {
            allowLoopback: LOOPBACK.has(new URL(config.publicUrl).hostname),
            onRefused: (clientId, reason) => app.log.info({ clientId: clientId.slice(0, 200), reason }, 'broker: client metadata document refused'),
          })
        : undefined;
      const provider = createBrokerProvider({ config, store, keys, grantClaims, ...(documents ? { resolveClientUrl: documents.resolve } : {}) });
      provider.on('server_error', (_ctx: unknown, err: Error) => app.log.error({ err }, 'broker: authorization server error'));
      // Koa prints unhandled errors to stderr unless someone listens.
      provider.app.on('error', (err: Error) => app.log.error({ err }, 'broker: request failed'));
      const registration = config.auth.broker.registration ? { counter: rateCounter, limits: config.auth.broker.registrationLimits } : undefined;
      mountProvider(app, provider, config, { defaultScope: defaultAuthorizationScope(config), clientIdMetadataDocuments: !!documents, ...(registration ? { registration } : {}) });
      registerInteractionRoutes(app, { provider, config, sessions: createBrowserSessions(store, config), grantClaims, claimNames: policyClaimNames(config), originGuard });
    },
    clientName: registeredClientName,
  };
}

/** The consent pages and `/login` share `secrets.cookieKey`; a single replica may leave both keys out. */
function withSecrets(config: Config, log: FastifyBaseLogger): Config {
  const { cookieKey, tokenKey } = config.secrets;
  if (cookieKey && tokenKey) return config;
  log.warn('secrets.cookieKey/tokenKey not set: using random keys, so browser sessions and pending authorizations end with this process');
  return { ...config, secrets: { cookieKey: cookieKey ?? randomBytes(32).toString('base64url'), tokenKey: tokenKey ?? randomBytes(32).toString('base64url') } };
}
