/**
 * The two tools an endpoint with `discovery` lists in place of a catalog above its threshold
 * (issue 31 §3, docs/tool-search.md): `search_tools` and `call_tool`. Their descriptions are
 * written for the model that reads them: what to pass, what comes back, what to do next.
 * Their arguments are checked here (MCP 2025-11-25 "Tools" §Error Handling: a malformed
 * request is a JSON-RPC -32602, not a tool result).
 */
import type { FoundTool } from './tool-index.js';

type Json = Record<string, unknown>;

export const SEARCH_TOOLS = 'search_tools';
export const CALL_TOOL = 'call_tool';

/** Results a search returns when the model names no limit, and the most it may ask for. */
export const DEFAULT_LIMIT = 8;
export const MAX_LIMIT = 50;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The two tool definitions, telling the model how many tools stand behind them. */
export function gatewayTools(total: number): Json[] {
  return [
    {
      name: SEARCH_TOOLS,
      title: 'Search tools',
      description:
        `Finds tools for a task among the ${total} tools available here (too many to list). ` +
        'Describe what you want to do in a few words, e.g. "create a jira ticket", "list s3 buckets", "post a message to a slack channel". ' +
        'Returns the best matching tools, best first, each with its name, description and inputSchema. ' +
        `Then call the tool you chose with ${CALL_TOOL} (or directly by its name). Search again with other words if nothing fits.`,
      inputSchema: {
        type: 'object',
        properties: {
          query: { type: 'string', minLength: 1, description: 'What you want to do, in natural language or keywords' },
          limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, description: `How many tools to return (default ${DEFAULT_LIMIT})` },
        },
        required: ['query'],
      },
      outputSchema: {
        type: 'object',
        properties: {
          tools: {
            type: 'array',
            items: { type: 'object', properties: { name: { type: 'string' }, title: { type: 'string' }, description: { type: 'string' }, inputSchema: { type: 'object' } }, required: ['name', 'inputSchema'] },
          },
        },
        required: ['tools'],
      },
      annotations: { title: 'Search tools', readOnlyHint: true, openWorldHint: false },
    },
    {
      name: CALL_TOOL,
      title: 'Call a tool',
      description:
        `Calls a tool found with ${SEARCH_TOOLS}: give its exact name and its arguments, which must match that tool's inputSchema. ` +
        "Returns that tool's own result.",
      inputSchema: {
        type: 'object',
        properties: {
          name: { type: 'string', minLength: 1, description: `The tool's name, exactly as ${SEARCH_TOOLS} returned it` },
          arguments: { type: 'object', description: "The tool's arguments, as its inputSchema describes them" },
        },
        required: ['name'],
      },
    },
  ];
}

/** The arguments of a `search_tools` call, or why they are refused. */
export function searchArguments(args: unknown): { query: string; limit: number } | { refused: string } {
  const given = isObject(args) ? args : {};
  if (typeof given.query !== 'string' || !given.query.trim()) return { refused: `Invalid params: ${SEARCH_TOOLS} needs a non-empty string "query"` };
  const limit = given.limit ?? DEFAULT_LIMIT;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) return { refused: `Invalid params: ${SEARCH_TOOLS} "limit" must be a whole number from 1 to ${MAX_LIMIT}` };
  return { query: given.query, limit };
}

/** The tool a `call_tool` call names and its arguments, or why they are refused. */
export function callArguments(args: unknown): { name: string; arguments: Json } | { refused: string } {
  const given = isObject(args) ? args : {};
  if (typeof given.name !== 'string' || !given.name) return { refused: `Invalid params: ${CALL_TOOL} needs the string "name" of the tool to call` };
  if (given.name === SEARCH_TOOLS || given.name === CALL_TOOL) return { refused: `Invalid params: ${CALL_TOOL} calls a tool found with ${SEARCH_TOOLS}, not "${given.name}"` };
  if (given.arguments !== undefined && !isObject(given.arguments)) return { refused: `Invalid params: ${CALL_TOOL} "arguments" must be an object` };
  return { name: given.name, arguments: (given.arguments as Json | undefined) ?? {} };
}

/** A search's answer: the tools as structured content, and the same as text for clients that read only text. */
export function searchResult(query: string, tools: FoundTool[]): Json {
  const text = tools.length ? JSON.stringify({ tools }) : `No tool matches "${query}". Try other words: what the tool does, or the product it works with.`;
  return { content: [{ type: 'text', text }], structuredContent: { tools } };
}
