/**
 * Walking a paginated MCP list to its end (MCP 2025-11-25 "Pagination"), bounded so a server
 * that keeps returning a cursor fails the test instead of looping.
 */
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { SessionClient } from './session-client.js';

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

/** Every tool name a session of the hand-made client (session-client.ts) is listed, over all pages. */
export async function sessionToolNames(client: SessionClient, token: string, sessionId: string): Promise<string[]> {
  const { items } = await allPages(async (cursor) => {
    const res = await client.post(token, { jsonrpc: '2.0', id: cursor ?? 'first', method: 'tools/list', params: cursor ? { cursor } : {} }, sessionId);
    assert.equal(res.status, 200);
    const { result } = (await res.json()) as { result: { tools: Array<{ name: string }>; nextCursor?: string } };
    return { items: result.tools.map((t) => t.name), nextCursor: result.nextCursor };
  });
  return items;
}
