/**
 * `backends[].upstreamAuth` (SPEC §3, §4, §8 "Linking"): the third-party provider whose
 * per-user token a backend needs — configured endpoints, a preset, or `discover` from the
 * backend itself — and what users who have not linked may be shown of the backend.
 */
import { z } from 'zod';
import { httpUrl } from './http-url.js';
import { declaredCatalogSchema, shareCatalogSchema } from './linking-schema.js';

/**
 * Providers with a preset (src/providers/provider-presets.ts): their endpoints and quirks are
 * known, so `authorizationUrl` and `tokenUrl` may be left out (configured values still win).
 */
export const PROVIDER_PRESETS = ['github', 'google', 'microsoft', 'atlassian', 'slack'] as const;

export const upstreamAuthSchema = z
  .object({
    provider: z.string().regex(/^[a-z0-9-]+$/, 'must match [a-z0-9-]+'),
    discover: z.boolean().default(false),
    /** A known provider: fills the endpoints and handles its deviations from OAuth 2.1. */
    preset: z.enum(PROVIDER_PRESETS).optional(),
    /**
     * Microsoft Entra tenant in the preset's endpoint paths: a tenant id, a domain, or
     * `common` (the default), `organizations`, `consumers`. A path segment, so no `/`.
     */
    tenant: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/, 'must be a tenant id, a domain, or common / organizations / consumers').optional(),
    authorizationUrl: httpUrl.optional(),
    tokenUrl: httpUrl.optional(),
    clientId: z.string().optional(),
    clientSecret: z.string().optional(),
    scopes: z.array(z.string()).default([]),
    /** RFC 7009 endpoint used when a user disconnects the account (optional). */
    revocationUrl: httpUrl.optional(),
    /** RFC 8707 resource indicator sent with authorization and token requests (optional). */
    resource: z.string().url().optional(),
    /**
     * With `discover`: the https URL of the gateway's Client ID Metadata Document, used as
     * `client_id` where the authorization server supports such documents, when it is
     * published elsewhere than `<publicUrl>/oauth/client-metadata.json` (providers/client-identity.ts).
     */
    clientMetadataUrl: z.string().url().refine((u) => /^https:\/\/[^/]+\/./.test(u), 'must be an https URL with a path (a client ID metadata document URL)').optional(),
    /** What users who have not linked may be shown (linking-schema.ts; issue 28). */
    shareCatalog: shareCatalogSchema,
    catalog: declaredCatalogSchema,
  })
  .strict()
  .superRefine((u, ctx) => {
    const issue = (key: string, message: string) => ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message });
    if (u.tenant !== undefined && u.preset !== 'microsoft') issue('tenant', 'is used only with preset microsoft');
    if (u.preset === 'microsoft') {
      // Identity platform v2 takes the API from the scopes and refuses RFC 8707 `resource`.
      if (u.resource) issue('resource', 'is refused by the Microsoft identity platform (v2); name the API in scopes instead, e.g. api://<app-id>/.default');
      if (!u.scopes.some((s) => s !== '' && s !== 'offline_access')) issue('scopes', 'is required with preset microsoft, e.g. [api://<app-id>/.default] or Microsoft Graph scopes such as [User.Read]');
    }
    if (u.clientMetadataUrl && !u.discover) issue('clientMetadataUrl', 'is used only with discover: true');
    if (u.discover) {
      if (u.preset) issue('preset', 'supplies the endpoints that discover would find: use one or the other');
      return;
    }
    for (const key of ['authorizationUrl', 'tokenUrl'] as const) {
      if (!u[key] && !u.preset) issue(key, 'is required unless discover is true or a preset supplies it');
    }
    if (!u.clientId) issue('clientId', 'is required unless discover is true');
  });

