/**
 * Which of a backend's tools clients see: `backends[].access.tools: { allow, deny }`.
 *
 * Patterns match the backend's own tool names (not the aggregated endpoint's
 * `{backend}__{name}`), case-sensitively; `*` matches any run of characters, including none,
 * and every other character matches itself. An empty `allow` allows every tool; a tool
 * matching any `deny` pattern is hidden even when `allow` names it (deny wins).
 *
 * A hidden tool must look like a tool that does not exist (it leaks nothing): `tools/list`
 * answers leave it out (SPEC §1: results are rewritten only "where routing must rewrite
 * them"), and a `tools/call` for it is answered by the gateway with the error the MCP spec
 * gives for an unknown tool (2025-11-25 "Tools" → "Error Handling": JSON-RPC `-32602`,
 * "Unknown tool: <name>") without reaching the backend.
 */
import type { BackendConfig } from '../config/schema.js';

const compiled = new WeakMap<BackendConfig, { allow: RegExp[]; deny: RegExp[] }>();

/** `*` wildcards to an anchored RegExp; everything else literal. */
export function patternToRegExp(pattern: string): RegExp {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[\\^$.|?+()[\]{}]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${source}$`, 's');
}

function policyOf(backend: BackendConfig) {
  let policy = compiled.get(backend);
  if (!policy) {
    const tools = backend.access.tools;
    policy = { allow: tools.allow.map(patternToRegExp), deny: tools.deny.map(patternToRegExp) };
    compiled.set(backend, policy);
  }
  return policy;
}

export function hasToolPolicy(backend: BackendConfig): boolean {
  const { allow, deny } = backend.access.tools;
  return allow.length > 0 || deny.length > 0;
}

export function isToolAllowed(backend: BackendConfig, toolName: string): boolean {
  if (!hasToolPolicy(backend)) return true;
  const { allow, deny } = policyOf(backend);
  if (deny.some((re) => re.test(toolName))) return false;
  return allow.length === 0 || allow.some((re) => re.test(toolName));
}

/**
 * A tools/list result with the tools this backend's policy hides removed. Everything else in
 * the result (`nextCursor`, `_meta`, unknown fields) is kept; a page may come out shorter or
 * empty, which pagination allows. A tool without a string name is judged as the name "".
 */
export function filterToolsResult(backend: BackendConfig, result: unknown): unknown {
  if (!hasToolPolicy(backend) || !result || typeof result !== 'object' || Array.isArray(result)) return result;
  const tools = (result as { tools?: unknown }).tools;
  if (!Array.isArray(tools)) return result;
  const visible = tools.filter((tool: unknown) => {
    const name = tool && typeof tool === 'object' ? (tool as { name?: unknown }).name : undefined;
    return isToolAllowed(backend, typeof name === 'string' ? name : '');
  });
  return visible.length === tools.length ? result : { ...result, tools: visible };
}
