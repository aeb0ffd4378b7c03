/**
 * What a backend with `upstreamAuth` may show users who have not linked their account
 * (SPEC §8 "Linking"; issue 28; served by src/linking/catalog.ts). A hosted server's lists
 * are its user's data, so by default nothing seen with one user's token is shown to another;
 * the operator may declare a catalog, or opt in to share tools and prompts for a backend
 * whose surface is the same for everyone. Resources, resource templates and `instructions`
 * are never shared: the refusal says why.
 */
import { z } from 'zod';

/** The lists an operator may let users who have not linked see as another user saw them. */
export const SHAREABLE_LISTS = ['tools', 'prompts'] as const;
export type ShareableList = (typeof SHAREABLE_LISTS)[number];

/** What can never be shared, named as an operator might try it. */
const USERS_OWN = ['resources', 'resourceTemplates', 'templates', 'instructions'];

/** `upstreamAuth.shareCatalog`: off (`[]`) unless the operator names `tools` and/or `prompts`. */
export const shareCatalogSchema = z
  .array(z.string())
  .default([])
  .superRefine((kinds, ctx) => {
    for (const [index, kind] of kinds.entries()) {
      if (SHAREABLE_LISTS.includes(kind as ShareableList)) continue;
      const message = USERS_OWN.includes(kind) ? `${kind} are a user's own data and are never shared` : `must be one of ${SHAREABLE_LISTS.join(', ')}`;
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: [index], message });
    }
  })
  .transform((kinds) => kinds as ShareableList[]);

const named = z.object({ name: z.string().min(1, 'must not be empty') });

/**
 * `upstreamAuth.catalog`: tools and prompts as `tools/list` and `prompts/list` give them. A
 * tool always has an `inputSchema` (MCP 2025-11-25 "Tools": it is required), `{type: object}`
 * when left out.
 */
export const declaredCatalogSchema = z
  .object({
    tools: z.array(named.extend({ inputSchema: z.record(z.unknown()).default({ type: 'object' }) }).passthrough()).optional(),
    prompts: z.array(named.passthrough()).optional(),
  })
  .strict()
  .optional();
