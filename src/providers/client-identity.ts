/**
 * Who the gateway is at a discovered authorization server (MCP 2025-11-25 "Authorization",
 * §Client Registration Approaches), and how it proves it at the token endpoint:
 *
 * 1. a configured client (`upstreamAuth.clientId`, `.clientSecret`): pre-registration, the
 *    operator's explicit choice, always first;
 * 2. a Client ID Metadata Document when the server's metadata says
 *    `client_id_metadata_document_supported`: the document's https URL is the `client_id`
 *    (`upstreamAuth.clientMetadataUrl`, else the gateway's own `<publicUrl>/oauth/client-metadata.json`,
 *    client-metadata.ts) — a public client, nothing to register or store;
 * 3. dynamic registration (RFC 7591) where the server offers it (client-registration.ts),
 *    its secret, if one is issued, sealed with the app's token cipher.
 *
 * The token endpoint auth method (RFC 7591 §2, RFC 8414 §2) is the one the registration
 * answer assigned when the metadata allows it, else the first the metadata lists of
 * `client_secret_basic`, `client_secret_post` — for a client holding a secret — and `none`;
 * metadata that lists none means `client_secret_basic` (the RFC 8414 default).
 */
import type { UpstreamAuthConfig } from '../config/schema.js';
import type { StateStore } from '../state/store.js';
import type { TokenCipher } from '../state/secrets.js';
import type { TokenEndpointAuthMethod } from './provider-client.js';
import { gatewayClientMetadataUrl } from './client-metadata.js';
import { registeredClient } from './client-registration.js';
import { DiscoveryError } from './discovery-fetch.js';
import type { UpstreamAuthMetadata } from './upstream-discovery.js';

export interface UpstreamClient {
  clientId: string;
  clientSecret?: string;
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  /** Where the identity came from (logs, tests). */
  source: 'configured' | 'metadata-document' | 'registered';
}

export interface ClientIdentityDeps {
  store: StateStore;
  cipher: TokenCipher;
  publicUrl: string;
  allowLoopback: boolean;
}

/** The client to use at `found`'s authorization server for `upstream`, registering one when that is the way (see the module comment). */
export async function upstreamClient(deps: ClientIdentityDeps, upstream: UpstreamAuthConfig, found: UpstreamAuthMetadata, redirectUri: string, backend: string): Promise<UpstreamClient> {
  const offered = found.tokenEndpointAuthMethods;
  if (upstream.clientId) {
    const secret = upstream.clientSecret;
    return { clientId: upstream.clientId, ...(secret ? { clientSecret: secret } : {}), tokenEndpointAuthMethod: negotiateAuthMethod(secret !== undefined && secret !== '', undefined, offered), source: 'configured' };
  }
  const documentUrl = upstream.clientMetadataUrl ?? gatewayClientMetadataUrl(deps.publicUrl);
  if (found.clientIdMetadataDocuments && documentUrl) {
    return { clientId: documentUrl, tokenEndpointAuthMethod: 'none', source: 'metadata-document' };
  }
  if (!found.registrationUrl) {
    throw new DiscoveryError(`backend "${backend}": its authorization server offers neither client ID metadata documents (with an https URL) nor dynamic client registration; configure upstreamAuth.clientId`);
  }
  const client = await registeredClient(deps.store, upstream.provider, found.registrationUrl, redirectUri, { allowLoopback: deps.allowLoopback, cipher: deps.cipher });
  const hasSecret = client.clientSecret !== undefined;
  return { ...client, tokenEndpointAuthMethod: negotiateAuthMethod(hasSecret, client.tokenEndpointAuthMethod, offered), source: 'registered' };
}

const SECRET_METHODS: readonly TokenEndpointAuthMethod[] = ['client_secret_basic', 'client_secret_post'];

/**
 * The token endpoint auth method: `assigned` (the registration answer's) when it is one the
 * gateway speaks and `offered` (the metadata's list) allows it; else, with a secret, the
 * first of basic and post that is offered, then `none` if offered; a list that names none
 * of these, or no list at all, means client_secret_basic with a secret (RFC 8414 §2).
 */
export function negotiateAuthMethod(hasSecret: boolean, assigned: string | undefined, offered: string[] | undefined): TokenEndpointAuthMethod {
  if (!hasSecret) return 'none';
  const allowed = (m: string) => offered === undefined || offered.includes(m);
  if ((assigned === 'none' || SECRET_METHODS.includes(assigned as TokenEndpointAuthMethod)) && allowed(assigned!)) return assigned as TokenEndpointAuthMethod;
  if (offered === undefined) return 'client_secret_basic';
  return SECRET_METHODS.find((m) => offered.includes(m)) ?? (offered.includes('none') ? 'none' : 'client_secret_basic');
}
