/**
 * The internal headers between the gateway's backend client (src/backends/streamable-http.ts)
 * and a local bridge (bridge-server.ts). Only the gateway knows the per-bridge key, so the
 * bridge can trust the user key that comes with it; the user's own token never goes there.
 */

/** The per-bridge secret: requests without it are refused (403). */
export const BRIDGE_KEY_HEADER = 'x-switchboard-bridge-key';

/**
 * The calling user's key (a digest of iss+sub, src/auth/principal.ts), sent only to a bridge,
 * which caps each user's sessions (`bridge.maxSessionsPerUser`, issue 13).
 */
export const BRIDGE_USER_HEADER = 'x-switchboard-bridge-user';
