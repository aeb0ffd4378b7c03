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
import { filterTools, toolNameOf } from './answer-edit.js';

/** A compiled pattern: whether a whole tool name matches it. */
export interface ToolPattern {
  test(name: string): boolean;
}

const compiled = new WeakMap<BackendConfig, { allow: ToolPattern[]; deny: ToolPattern[] }>();

/**
 * `*` wildcards, everything else literal, matched against the whole name in time linear in it
 * (issue 41 §4): the literal runs between the stars are found left to right with `indexOf`,
 * which is all a `*`-only glob needs. (A backtracking RegExp `^.*_.*_.*x$` took 29 s on a name
 * of 4,000 underscores — a name a user sends in a call, or a backend in its list.)
 */
export function patternToRegExp(pattern: string): ToolPattern {
  const parts = pattern.split('*');
  if (parts.length === 1) return { test: (name) => name === pattern };
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  const middle = parts.slice(1, -1);
  return {
    test(name) {
      if (name.length < first.length + last.length || !name.startsWith(first) || !name.endsWith(last)) return false;
      const end = name.length - last.length;
      let at = first.length;
      for (const part of middle) {
        const found = name.indexOf(part, at);
        if (found === -1 || found + part.length > end) return false;
        at = found + part.length;
      }
      return true;
    },
  };
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

/**
 * Which list entry decides a tool, for the audit trail: `access.tools.deny[i]` (hidden),
 * `access.tools.allow[i]` (admitted by that pattern), `access.tools.allow` (hidden: no allow
 * pattern matched) or undefined when the backend has no lists.
 */
export function toolListEntry(backend: BackendConfig, toolName: string): { allowed: boolean; rule: string } | undefined {
  if (!hasToolPolicy(backend)) return undefined;
  const { allow, deny } = policyOf(backend);
  const denied = deny.findIndex((re) => re.test(toolName));
  if (denied >= 0) return { allowed: false, rule: `access.tools.deny[${denied}]` };
  if (!allow.length) return undefined;
  const allowed = allow.findIndex((re) => re.test(toolName));
  return allowed >= 0 ? { allowed: true, rule: `access.tools.allow[${allowed}]` } : { allowed: false, rule: 'access.tools.allow' };
}

export function isToolAllowed(backend: BackendConfig, toolName: string): boolean {
  if (!hasToolPolicy(backend)) return true;
  const { allow, deny } = policyOf(backend);
  if (deny.some((re) => re.test(toolName))) return false;
  return allow.length === 0 || allow.some((re) => re.test(toolName));
}

/** A tools/list result with the tools this backend's lists hide removed (answer-edit.ts filterTools). */
export function filterToolsResult(backend: BackendConfig, result: unknown): unknown {
  if (!hasToolPolicy(backend)) return result;
  return filterTools(result, (tool) => isToolAllowed(backend, toolNameOf(tool)));
}
