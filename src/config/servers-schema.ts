/**
 * The `servers` config block: virtual servers (issue 31 §1, docs/virtual-servers.md). Each is
 * one more MCP endpoint, `/mcp/{name}`, built from chosen tools, prompts and resources of the
 * backends, with tools renamed, described anew and arguments fixed or hidden. The schema
 * checks what can be known without asking a backend (names, clashes, that every `from` names
 * a backend); what needs the backend's own tool definition (that a hidden argument is
 * optional) is checked when the gateway sees the definition (aggregate/virtual-tools.ts).
 */
import { z } from 'zod';
import { DISCOVERY_TOOL_NAMES, discoverySchema } from './discovery-schema.js';

/** MCP 2025-11-25 "Tools" §Tool names: 1–128 characters of A-Z a-z 0-9 _ - . */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Same rule as backends[].name: the server's path segment, `/mcp/{name}`. */
const serverName = z.string().regex(/^[a-z0-9-]+$/, 'must match [a-z0-9-]+ (it becomes the path /mcp/{name})');

/** `{backend}.{name}`: the backend before the first dot (backend names have none), the backend's own name after it. */
const qualifiedFrom = z.string().regex(/^[a-z0-9-]+\.\S+$/, 'must be "{backend}.{name}", e.g. github.create_issue');

/**
 * One argument of a tool entry: `{ value }` sets it on every call and takes it out of the
 * advertised schema; `{ hide: true }` takes an optional argument out without setting it.
 */
const argumentRule = z
  .object({ value: z.unknown().optional(), hide: z.literal(true).optional() })
  .strict()
  .superRefine((a, ctx) => {
    const fixed = 'value' in a && a.value !== undefined;
    if (fixed === Boolean(a.hide)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must have exactly one of value (the argument is fixed) or hide: true (an optional argument is left out)' });
  });

/** A prompt entry: the backend's prompt, offered under `as` with its own title and description where given. */
const promptEntry = z
  .object({
    from: qualifiedFrom,
    as: z.string().regex(TOOL_NAME, 'must be 1-128 characters of A-Z a-z 0-9 _ - . (MCP tool names)').optional(),
    title: z.string().min(1).optional(),
    description: z.string().min(1).optional(),
  })
  .strict();

/** A tool entry: what a prompt entry has, and the arguments the server fixes or hides. */
const toolEntry = promptEntry.extend({ arguments: z.record(argumentRule).default({}) }).strict();

/** Resources and resource templates of one backend whose URI (template) starts with `uriPrefix`; no prefix: all of them. */
const resourceEntry = z
  .object({
    from: serverName,
    uriPrefix: z.string().default(''),
  })
  .strict();

export const serverSchema = z
  .object({
    name: serverName,
    title: z.string().min(1).optional(),
    instructions: z.string().min(1).optional(),
    tools: z.array(toolEntry).default([]),
    prompts: z.array(promptEntry).default([]),
    resources: z.array(resourceEntry).default([]),
    /** Tool search on this server (issue 31 §3, discovery-schema.ts); absent: off. */
    discovery: discoverySchema.optional(),
  })
  .strict()
  .superRefine((s, ctx) => {
    // With discovery the gateway's two tools take these names on the server.
    if (s.discovery) {
      s.tools.forEach((t, i) => {
        if (DISCOVERY_TOOL_NAMES.includes(offeredName(t))) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['tools', i, t.as ? 'as' : 'from'], message: `offers the name "${offeredName(t)}", which discovery gives the gateway's own tool on this server (rename it with as)` });
      });
    }
    if (!s.tools.length && !s.prompts.length && !s.resources.length) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['tools'], message: 'a server needs at least one tool, prompt or resource entry' });
    }
    duplicateNames(s.tools, 'tools', 'tool', ctx);
    duplicateNames(s.prompts, 'prompts', 'prompt', ctx);
  });

export type ServerConfig = z.output<typeof serverSchema>;
export type ToolEntry = ServerConfig['tools'][number];
export type PromptEntry = ServerConfig['prompts'][number];

/** The name an entry is offered under: `as`, else the backend's own name. */
export function offeredName(entry: { from: string; as?: string }): string {
  return entry.as ?? entry.from.slice(entry.from.indexOf('.') + 1);
}

function duplicateNames(entries: Array<{ from: string; as?: string }>, key: string, kind: string, ctx: z.RefinementCtx): void {
  const seen = new Set<string>();
  entries.forEach((e, i) => {
    const name = offeredName(e);
    if (seen.has(name)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key, i, e.as ? 'as' : 'from'], message: `offers the ${kind} name "${name}" a second time on this server (rename one with as)` });
    seen.add(name);
  });
}

/**
 * The checks that need the backends: a server's name is a path beside theirs (`/mcp/{name}`),
 * so it may not be a backend's or another server's; every `from` names a configured backend.
 */
export function serverIssues(servers: readonly ServerConfig[], backendNames: ReadonlySet<string>): Array<{ path: Array<string | number>; message: string }> {
  const issues: Array<{ path: Array<string | number>; message: string }> = [];
  const seen = new Set<string>();
  servers.forEach((s, i) => {
    if (backendNames.has(s.name)) issues.push({ path: ['servers', i, 'name'], message: `"${s.name}" is already a backend's name; /mcp/${s.name} can serve only one of them` });
    else if (seen.has(s.name)) issues.push({ path: ['servers', i, 'name'], message: `duplicate server name "${s.name}"` });
    seen.add(s.name);
    const check = (key: string, j: number, backend: string) => {
      if (!backendNames.has(backend)) issues.push({ path: ['servers', i, key, j, 'from'], message: `names no configured backend ("${backend}")` });
    };
    s.tools.forEach((t, j) => check('tools', j, t.from.slice(0, t.from.indexOf('.'))));
    s.prompts.forEach((p, j) => check('prompts', j, p.from.slice(0, p.from.indexOf('.'))));
    s.resources.forEach((r, j) => check('resources', j, r.from));
  });
  return issues;
}
