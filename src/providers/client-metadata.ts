/**
 * The gateway's Client ID Metadata Document (MCP 2025-11-25 "Authorization", §Client ID
 * Metadata Documents; draft-ietf-oauth-client-id-metadata-document): a JSON document at an
 * https URL that is itself the `client_id`. An authorization server that supports such
 * documents fetches it and learns the client's name and redirect URIs without a
 * registration. The gateway serves its own at `<publicUrl>/oauth/client-metadata.json`
 * (connect/client-metadata-route.ts); `upstreamAuth.clientMetadataUrl` names a copy
 * published elsewhere, which must say the same.
 */
import type { Config } from '../config/schema.js';
import { callbackUri } from './redirect-uri.js';

/** Where the gateway serves its document, below `publicUrl`. */
export const CLIENT_METADATA_PATH = '/oauth/client-metadata.json';

/**
 * The URL of the gateway's own document, or undefined when `publicUrl` is not https: the
 * draft requires an https `client_id` URL, and a server could not fetch a plain-http one.
 */
export function gatewayClientMetadataUrl(publicUrl: string): string | undefined {
  return publicUrl.startsWith('https://') ? `${publicUrl}${CLIENT_METADATA_PATH}` : undefined;
}

/**
 * The document: `client_id` (its own URL), a public client (`token_endpoint_auth_method:
 * none`; PKCE protects the code) of the authorization code grant with refresh tokens, and
 * the redirect URI of every provider found by discovery (`<publicUrl>/oauth/callback/{provider}`).
 */
export function clientMetadataDocument(config: Config, clientId: string): Record<string, unknown> {
  const providers = new Set(config.backends.filter((b) => b.upstreamAuth?.discover).map((b) => b.upstreamAuth!.provider));
  return {
    client_id: clientId,
    client_name: 'Switchboard',
    client_uri: config.publicUrl,
    redirect_uris: [...providers].sort().map((p) => callbackUri(config.publicUrl, p)),
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}
