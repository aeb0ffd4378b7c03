/**
 * The fingerprint of a tool definition (issue 31 §2): SHA-256 of the canonical JSON (RFC 8785,
 * ops/canonical-json.ts) of the members that change what a model reads or what a call does —
 * `name`, `title`, `description`, `inputSchema`, `outputSchema`, `annotations`, `execution`
 * (MCP 2025-11-25 "Tools": task support) and `_meta` without the keys under the protocol's
 * own `io.modelcontextprotocol/` prefix, which SDKs write for bookkeeping, not tool authors.
 * So `_meta.ui` (MCP Apps' `resourceUri`, the UI a host renders) and vendor keys such as
 * `openai/outputTemplate` are covered. `icons` is not: it changes no behaviour.
 *
 * Member order and spacing do not count (canonical JSON), so a backend that re-serialises
 * the same definition keeps its pin.
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from '../ops/canonical-json.js';

export const FINGERPRINTED = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations', 'execution'] as const;
/** `_meta` keys with this prefix are left out of the fingerprint. */
export const IGNORED_META_PREFIX = 'io.modelcontextprotocol/';

export type ToolDefinition = Record<string, unknown>;

export function isToolDefinition(tool: unknown): tool is ToolDefinition & { name: string } {
  return !!tool && typeof tool === 'object' && !Array.isArray(tool) && typeof (tool as { name?: unknown }).name === 'string';
}

/** What the fingerprint covers of `tool`, as a plain object (members absent from the tool stay absent). */
export function fingerprinted(tool: ToolDefinition): ToolDefinition {
  const out: ToolDefinition = {};
  for (const key of FINGERPRINTED) if (tool[key] !== undefined) out[key] = tool[key];
  const meta = tool._meta;
  if (meta && typeof meta === 'object' && !Array.isArray(meta)) {
    const kept = Object.entries(meta).filter(([k]) => !k.startsWith(IGNORED_META_PREFIX));
    if (kept.length) out._meta = Object.fromEntries(kept);
  }
  return out;
}

/** Hex SHA-256 of the canonical JSON of {@link fingerprinted}. */
export function fingerprint(tool: ToolDefinition): string {
  return sha256(canonicalJson(fingerprinted(tool)));
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
