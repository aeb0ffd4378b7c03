/**
 * The names of the store's keyed values (`StateStore.putValue` and its siblings), every one
 * of them, in one place: what the gateway keeps in the shared store, and under which name,
 * reads here as a table instead of being spread over the modules that use it (issue 14).
 *
 * These names are a contract with the running deployment, not a detail: a rolling upgrade
 * (SPEC §5) has old and new replicas reading each other's browser sessions, vault entries,
 * OAuth `state`, locks and broker records, so a name must stay byte-identical across
 * versions. Change one only with a migration. The Redis store adds its own `v:` and the
 * configured `redis.keyPrefix` (redis-keys.ts); the memory store uses the names as they are.
 *
 * Every value is touched one key at a time, so none needs a Redis Cluster hash tag
 * (redis-keys.ts). Parts that come from requests are made safe where the name is built
 * (broker ids: {@link safeId}; metadata document URLs: hashed).
 */
import { createHash } from 'node:crypto';

/** Keys built from ids that come from requests (client ids can be any string) stay short and plain. */
function safeId(id: string): string {
  return /^[A-Za-z0-9_-]{1,128}$/.test(id) ? id : `h.${createHash('sha256').update(id).digest('base64url')}`;
}

const BROKER = 'broker:';

export const ValueKeys = {
  /** A browser session (browser/browser-sessions.ts). */
  browserSession: (sessionId: string) => `browser:${sessionId}`,
  /** A redeemed sign-in `state` (browser/login-routes.ts), remembered until it would have expired anyway: a replayed callback is refused. */
  usedLoginState: (state: string) => `login-used:${state}`,
  /** A provider's dynamically registered OAuth client (providers/client-registration.ts). */
  providerClient: (provider: string) => `client:${provider}`,
  /** A pending account link, by its OAuth `state` (connect/pending-authorization.ts). */
  oauthState: (state: string) => `oauth-state:${state}`,
  /** One user's sealed tokens for one provider (connect/token-vault.ts; also the sealing context). */
  vault: (userKey: string, provider: string) => `vault:${userKey}:${provider}`,
  /** Who refreshes a user's provider token right now (connect/usable-token.ts). */
  refreshLock: (userKey: string, provider: string) => `lock:refresh:${userKey}:${provider}`,
  /** An elicitation waiting for the user's answer (connect/elicitations.ts). */
  elicitation: (id: string) => `elicitation:${id}`,
  /**
   * A backend's answer to a request without a token (`initialize` or a list method), kept for
   * users who have not linked (linking/catalog.ts). Not `catalog:…`: that name held, before
   * issue 28, whatever answer came last, whoever's token produced it, and is never read.
   */
  catalogAnonymous: (backend: string, what: string) => `catalog-public:${backend}:${what}`,
  /** A tools or prompts list seen with some user's token, kept only where `upstreamAuth.shareCatalog` shares it. */
  catalogShared: (backend: string, method: string) => `catalog-shared:${backend}:${method}`,
  /** Which MCP era a backend speaks, as its probe found it, so replicas probe it once (backends/era.ts). */
  backendEra: (backend: string) => `era:${backend}`,
  /** Sessions waiting for a user to link a provider (linking/waiters.ts). */
  linkWaiters: (userKey: string, provider: string) => `${userKey}:link-waiting:${provider}`,
  /** Who opens a session's backend session once its account is linked (linking/backend-session.ts). */
  linkOpen: (userKey: string, sessionId: string) => `${userKey}:link-open:${sessionId}`,
  /** The same, for one member of an aggregated session (aggregate/member-link.ts). */
  memberLinkOpen: (userKey: string, sessionId: string, member: string) => `${userKey}:link-open:${sessionId}:${member}`,
  /** Who brings a missing member back into an aggregated session (aggregate/rejoin.ts). */
  aggregateRejoin: (userKey: string, sessionId: string, member: string) => `${userKey}:aggregate-rejoin:${sessionId}:${member}`,
  /** The digest of the tool list a session last listed on an endpoint with tool search, or `changed` (discovery/user-lists.ts). */
  toolSearchList: (userKey: string, sessionId: string, endpoint: string) => `${userKey}:tool-search:${sessionId}:${endpoint}`,
  /** The standalone stream a replica opened ahead of its client (mcp/standalone-early.ts). */
  standaloneAwaiting: (userKey: string, sessionId: string) => `${userKey}:standalone-awaiting:${sessionId}`,
  /** A user's exchanged token for a target (exchange/exchange-cache.ts; also the sealing context). */
  exchange: (userKey: string, target: string) => `exchange:${userKey}:${target}`,
  /** Who exchanges for that cache entry right now (exchange/one-exchange.ts). */
  exchangeLock: (exchangeKey: string) => `lock:${exchangeKey}`,
  /** Why the last exchange for that entry failed, shared with the replicas that waited. */
  exchangeFailure: (exchangeKey: string) => `lock:${exchangeKey}:failed`,
  /** The gateway's own session toward a 2025-era backend for stateless-era clients, per user, backend and capability set (stateless/legacy-sessions.ts). */
  legacyBridgeSession: (userKey: string, backend: string, capabilities: string) => `${userKey}:bridge-session:${backend}:${capabilities}`,
  /** One of a user's `stateless.maxSessionsPerUser` places for those sessions, holding the key of the session in it (stateless/session-budget.ts). */
  bridgeSessionSlot: (userKey: string, slot: number) => `${userKey}:bridge-slot:${slot}`,
  /** A session the gateway keeps for a 2025-11-25 client of a 2026-07-28 backend, which has none (backends/modern/adapted-sessions.ts). */
  adaptedSession: (userKey: string, sessionId: string) => `${userKey}:adapted-session:${sessionId}`,
  /** A call held by a `confirm` rule, waiting for (or holding) its approval (policy/approvals.ts, issue 46). */
  approval: (userKey: string, id: string) => `${userKey}:approval:${id}`,
  /** The approval a call is bound to, by the digest of its backend, tool, argument hash and policy version. */
  approvalCall: (userKey: string, binding: string) => `${userKey}:approval-call:${binding}`,
  /** The one decision taken on an approval (approved or denied): whoever writes it first decides. */
  approvalDecision: (userKey: string, id: string) => `${userKey}:approval-decided:${id}`,
  /** The caller's open approvals (pending, or approved and unused), a field per approval (policy/approval-index.ts). */
  approvalsOpen: (userKey: string) => `${userKey}:approvals-open`,
  /** The pending approvals of a four-eyes rule, a field per approval naming its caller: what its approvers may decide. */
  approvalQueue: (rule: string) => `approval-queue:${rule}`,
  /** A four-eyes approval this approver decided, naming its caller's key (so the approver's link still finds it). */
  approvalDecidedBy: (approverKey: string, id: string) => `${approverKey}:approval-decided-by:${id}`,
  /** The pinned tool definitions of a backend with `pinning.scope: backend`, a field per tool (`StateStore.putField`; pinning/pin-book.ts). */
  pins: (backend: string) => `pins:${backend}`,
  /** The changed definitions of that backend's tools waiting for approval, a field per tool. */
  pinsPending: (backend: string) => `pins-pending:${backend}`,
  /** One user's pins of a backend with `pinning.scope: user` (issue 41 §2), a field per tool. */
  userPins: (userKey: string, backend: string) => `${userKey}:pins:${backend}`,
  /** One user's changed definitions waiting for approval, a field per tool. */
  userPinsPending: (userKey: string, backend: string) => `${userKey}:pins-pending:${backend}`,
  /** The users with pins of a backend, a field per user key (`pins export` reads their pins). */
  pinUsers: (backend: string) => `pins-users:${backend}`,
  /** The users who may have changes waiting for approval, a field per user key (`pins approve`, `pins list`). */
  pinPendingUsers: (backend: string) => `pins-pending-users:${backend}`,
  /** The fingerprint of each tool as the first user saw it, a field per tool: compared only, never served (users' variants, pinning/variants.ts). */
  pinVariants: (backend: string) => `pins-variants:${backend}`,
  /** A change of one tool to one fingerprint, claimed by the replica that reports it (once for all replicas). */
  pinChangeReported: (backend: string, tool: string, fingerprint: string) => `pin-change:${backend}:${createHash('sha256').update(tool).digest('base64url')}:${fingerprint}`,
  /** A user's definition of one tool that differs from the first user's, claimed by the replica that reports it. */
  pinVariantReported: (backend: string, tool: string, fingerprint: string) => `pin-variant:${backend}:${createHash('sha256').update(tool).digest('base64url')}:${fingerprint}`,
  /** Broker mode (broker/store-adapter.ts): an oidc-provider record of `model`. */
  brokerRecord: (model: string, id: string) => `${BROKER}${model}:${safeId(id)}`,
  /** A single-use record's "consumed" marker, across replicas. */
  brokerConsumed: (model: string, id: string) => `${BROKER}consumed:${model}:${safeId(id)}`,
  /** A record found by its `uid` (oidc-provider sessions). */
  brokerByUid: (model: string, uid: string) => `${BROKER}${model}Uid:${safeId(uid)}`,
  /** A grant (revocation deletes it by id). */
  brokerGrant: (grantId: string) => `${BROKER}Grant:${safeId(grantId)}`,
  /** The policy claims recorded with a grant (broker/grant-claims.ts). */
  brokerGrantClaims: (grantId: string) => `${BROKER}claims:${grantId}`,
  /** A fetched Client ID Metadata Document, by its URL's digest (broker/client-metadata-documents.ts). */
  brokerClientDocument: (clientId: string) => `${BROKER}cimd:${createHash('sha256').update(clientId).digest('base64url')}`,
} as const;
