/**
 * What tool search costs (issue 31 §3, docs/tool-search.md), in process: the discovery face
 * (src/discovery/discovery-backend.ts) over an endpoint that answers `tools/list` at once with
 * the 300-tool catalog of the tests (test/fixtures/tool-catalog.ts), so only the gateway's
 * own work is timed — no network; the memory store stands in for Redis (a search reads one
 * value there: with Redis add one round trip). Figures:
 *
 * - building the index of 300 tools (once per distinct list and replica);
 * - `tools/list` with discovery on: the list read, its digest, the two tools answered;
 * - `search_tools` on a kept list (the 20 test queries in turn): latency per search, p50/p99.
 *
 *   node --import tsx bench/tool-search.ts
 *
 * Bounded: fixed loop counts.
 */
import { performance } from 'node:perf_hooks';
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../src/backends/backend.js';
import { syntheticBody } from '../src/backends/body.js';
import { parseConfig } from '../src/config/load.js';
import { DiscoveryBackend } from '../src/discovery/discovery-backend.js';
import { ToolIndex } from '../src/discovery/tool-index.js';
import { MemoryStore } from '../src/state/memory-store.js';
import { QUERIES } from '../test/discovery/search-queries.js';
import { catalogOf } from '../test/fixtures/tool-catalog.js';

const BUILDS = 50;
const LISTS = 500;
const SEARCHES = 5_000;

const TOOLS = (['github', 'work', 'cloud'] as const).flatMap((d) =>
  catalogOf(d).map((t) => ({ name: `${d}__${t.name}`, title: t.title, description: t.description, inputSchema: { type: 'object', properties: Object.fromEntries(Object.keys(t.args).map((a) => [a, { type: 'string' }])), required: Object.keys(t.args) } })),
);

function endpoint(): McpBackend {
  const config = parseConfig({ publicUrl: 'https://mcp.example.com', auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' }, backends: [{ name: 'x', url: 'http://127.0.0.1:9/mcp' }] });
  return {
    name: '*',
    config: config.backends[0]!,
    post: async (body: string): Promise<BackendResponse> => {
      const { id } = JSON.parse(body) as { id: number };
      return { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(JSON.stringify({ jsonrpc: '2.0', id, result: { tools: TOOLS } })) };
    },
    get: () => Promise.reject(new Error('unused')),
    delete: () => Promise.reject(new Error('unused')),
    close: async () => {},
  };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
const ms = (n: number) => `${n.toFixed(3)} ms`;

async function main(): Promise<void> {
  let start = performance.now();
  for (let i = 0; i < BUILDS; i++) new ToolIndex(TOOLS);
  console.log(`index of ${TOOLS.length} tools built in ${ms((performance.now() - start) / BUILDS)} (mean of ${BUILDS})`);

  const face = new DiscoveryBackend(endpoint(), () => 50, new MemoryStore());
  const caller = { principal: { userKey: 'bench-user' }, sessionId: 'bench-session', log: console } as unknown as BackendCallHeaders['caller'];
  const headers: BackendCallHeaders = { caller };
  start = performance.now();
  for (let i = 0; i < LISTS; i++) await (await face.post(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/list' }), headers)).body.text();
  console.log(`tools/list (300 tools read, digest, two tools answered): ${ms((performance.now() - start) / LISTS)} per list (mean of ${LISTS})`);

  const times: number[] = [];
  for (let i = 0; i < SEARCHES; i++) {
    const [query] = QUERIES[i % QUERIES.length]!;
    const body = JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'search_tools', arguments: { query, limit: 8 } } });
    const t = performance.now();
    await (await face.post(body, headers)).body.text();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  console.log(`search_tools over ${TOOLS.length} tools, kept list: p50 ${ms(percentile(times, 0.5))}, p99 ${ms(percentile(times, 0.99))} (${SEARCHES} searches)`);
}

await main();
