/**
 * The `discovery` block (issue 31 §3, docs/tool-search.md): tool search on an aggregated
 * endpoint, at the top level for `/mcp` and per virtual server (`servers[].discovery`). When
 * the tools a user sees there are more than `threshold`, `tools/list` shows the gateway's
 * `search_tools` and `call_tool` in their place (src/discovery/). No block: nothing changes.
 */
import { z } from 'zod';

/** The names the gateway's two tools take on an endpoint with discovery. */
export const DISCOVERY_TOOL_NAMES: readonly string[] = ['search_tools', 'call_tool'];

export const discoverySchema = z
  .object({
    /** More visible tools than this and the endpoint lists the two search tools instead. */
    threshold: z
      .number({ invalid_type_error: 'must be a whole number (the most tools listed as they are)', required_error: 'is required: the most tools listed as they are (e.g. 50)' })
      .int('must be a whole number (the most tools listed as they are)')
      .min(0, 'must be 0 or more (0: always search)'),
  })
  .strict();

export type DiscoveryConfig = z.output<typeof discoverySchema>;
