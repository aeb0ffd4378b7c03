/**
 * The resource of a refresh, checked before the refresh token is rotated (issue 28 §6).
 *
 * oidc-provider 8's refresh_token grant consumes the presented refresh token first and
 * resolves the `resource` after (lib/actions/grants/refresh_token.js, then
 * helpers/resolve_resource.js). A refresh refused for its resource — one the grant does not
 * cover (RFC 8707 §2.2: a refresh may narrow the audience, never widen it), several at once,
 * or one the gateway no longer serves — therefore used the token up, and the client's next,
 * proper refresh was a replay that ended the whole grant (OAuth 2.1 §4.3.1).
 *
 * The provider asks `rotateRefreshToken(ctx)` right before it consumes, with the parameters
 * parsed and the refresh token loaded, so the broker answers that question after making the
 * same checks itself: `invalid_target` there leaves the token unused and the grant whole.
 */
import { errors, type KoaContextWithOIDC } from 'oidc-provider';
import type { Config } from '../config/schema.js';
import { resourceScopes } from './resource-servers.js';

/** oidc-provider's `rotateRefreshToken`: always rotate, once the resource is known to be granted. */
export function rotateAfterResourceCheck(config: Config): (ctx: KoaContextWithOIDC) => Promise<boolean> {
  const served = resourceScopes(config);
  return async (ctx) => {
    const token = ctx.oidc.entities.RefreshToken;
    if (token) refuseUngrantedResource(ctx.oidc.params?.resource, token.resource, served);
    return true;
  };
}

/** Throws `invalid_target` where oidc-provider would, after consuming the token. */
function refuseUngrantedResource(requested: unknown, granted: string | string[] | undefined, served: Map<string, string[]>): void {
  if (Array.isArray(requested)) {
    if (requested.length > 1) throw new errors.InvalidTarget('only a single resource indicator value must be requested/resolved during Access Token Request');
    requested = requested[0];
  }
  const grantedSet = new Set(Array.isArray(granted) ? granted : granted === undefined ? [] : [granted]);
  // Without `resource` the grant's own is used (resource-servers.ts `useGrantedResource`), which must be one.
  if (requested === undefined || requested === '') {
    if (grantedSet.size > 1) throw new errors.InvalidTarget('several resources were granted: name one');
    requested = [...grantedSet][0];
    if (requested === undefined) return;
  }
  if (typeof requested !== 'string' || !grantedSet.has(requested)) throw new errors.InvalidTarget('resource was not granted to this refresh token');
  if (!served.has(requested)) throw new errors.InvalidTarget(`resource is not one of this gateway's MCP endpoints`);
}
