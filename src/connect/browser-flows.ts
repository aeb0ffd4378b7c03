/**
 * Wiring of the URL-mode elicitation flow (SPEC §4): token vault, elicitation records,
 * browser sign-in, the connect/callback/connections pages, the approval page of calls held
 * by `confirm` rules (issue 46), and the upstream authorization
 * the MCP layer consults for backends with `upstreamAuth`. `hooks.afterLink` runs after a
 * user's tokens are stored (from an elicitation, after its completion notification, or from
 * Connect on /connections): the MCP layer can bring sessions waiting for the link to life.
 *
 * Without configured secrets (the development default, or a single replica that links no
 * accounts) random keys are made at start: links and sessions then end with the process.
 * The config schema insists on real keys where several replicas must share them.
 *
 * The flows read the gateway's one live config (config/live-config.ts), so a reload that adds,
 * removes or changes a backend with `upstreamAuth` (issue 32 §1) reaches the connect,
 * callback and `/connections` pages on their next request. Only the generated keys are kept
 * aside: `secrets` needs a restart anyway, and a copy of the whole config would never see a
 * reload.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';
import type { StateStore } from '../state/store.js';
import { createBrowserSessions } from '../browser/browser-sessions.js';
import { registerConnectRoutes } from './connect-routes.js';
import { registerConnectionsRoutes } from './connections-routes.js';
import { registerApprovalRoutes, type ClientNameOf } from './approval-routes.js';
import { ApprovalStore } from '../policy/approvals.js';
import { approvalEvents } from '../policy/approval-events.js';
import { registerClientMetadataRoute } from './client-metadata-route.js';
import { ElicitationStore } from './elicitations.js';
import { registerLoginRoutes } from '../browser/login-routes.js';
import { registerCallbackRoutes, type LinkHooks } from './oauth-callback.js';
import { createEndpointResolver } from '../providers/provider-endpoints.js';
import { createTokenCipher } from '../state/secrets.js';
import { TokenVault } from './token-vault.js';
import { UpstreamAuth } from './upstream-auth.js';

/** What the browser flows are built from. */
export interface BrowserFlowDeps {
  config: Config;
  store: StateStore;
  metrics: Metrics;
  /** In broker mode: the registered names of the clients, which the approval page shows (issue 46 §3). */
  clientName?: ClientNameOf;
}

export function registerBrowserFlows(app: FastifyInstance, deps: BrowserFlowDeps, hooks: LinkHooks): UpstreamAuth {
  const config = withSecrets(deps.config, app);
  const { store, metrics } = deps;
  // One cipher for what the gateway keeps sealed at rest: users' tokens, registered client secrets.
  const cipher = createTokenCipher(config.secrets.tokenKey!);
  const vault = new TokenVault(store, cipher, { log: app.log });
  const elicitations = new ElicitationStore(store);
  const sessions = createBrowserSessions(store, config);
  const endpoints = createEndpointResolver(config, store, cipher, app.log);
  registerLoginRoutes(app, { config, store, sessions });
  const flow = { config, store, metrics, sessions, elicitations, vault, endpoints, hooks };
  registerConnectRoutes(app, flow);
  registerCallbackRoutes(app, flow);
  registerConnectionsRoutes(app, flow);
  // Decisions and expiries noticed here are audited like those of the calls (policy/approval-events.ts).
  registerApprovalRoutes(app, { sessions, approvals: new ApprovalStore(store, approvalEvents({ audit: () => app.audit })), config, clientName: deps.clientName });
  registerClientMetadataRoute(app, config);
  return new UpstreamAuth({ store, vault, elicitations, metrics, endpoints, log: app.log });
}

/**
 * `config` as it is now and after every reload, but with generated keys where `secrets` has
 * none: a view that answers `secrets` from the keys made here and every other key from the
 * live object, whose top level a reload replaces.
 */
function withSecrets(config: Config, app: FastifyInstance): Config {
  const { cookieKey, tokenKey } = config.secrets;
  if (cookieKey && tokenKey) return config;
  if (config.backends.some((b) => b.upstreamAuth) || config.auth.login) {
    app.log.warn('secrets.cookieKey/tokenKey not set: using random keys, so linked accounts and browser sessions end with this process');
  }
  const secrets: Config['secrets'] = {
    cookieKey: cookieKey ?? randomBytes(32).toString('base64url'),
    tokenKey: tokenKey ?? randomBytes(32).toString('base64url'),
  };
  return new Proxy(config, { get: (target, key) => (key === 'secrets' ? secrets : Reflect.get(target, key)) });
}
