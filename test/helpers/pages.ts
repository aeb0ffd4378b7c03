/**
 * Walking a paginated MCP list to its end (MCP 2025-11-25 "Pagination"), bounded so a server
 * that keeps returning a cursor fails the test instead of looping.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

const MAX_PAGES = 50;

export async function allPages<T>(fetch: (cursor?: string) => Promise<{ items: T[]; nextCursor?: string }>): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let cursor: string | undefined;
  for (let pages = 1; pages <= MAX_PAGES; pages++) {
    const page = await fetch(cursor);
    items.push(...page.items);
    cursor = page.nextCursor;
    if (!cursor) return { items, pages };
  }
  throw new Error(`more than ${MAX_PAGES} pages`);
}

/** Every tool name the client's server lists, over all pages. */
export const allToolNames = (client: Client) =>
  allPages(async (cursor) => {
    const r = await client.listTools(cursor ? { cursor } : {});
    return { items: r.tools.map((t) => t.name), nextCursor: r.nextCursor };
  });
