/**
 * `policy` and `audit` (issue 30 §2–§3; reference in docs/policy-and-audit.md).
 *
 * `policy.rules` are global and ordered: each rule may test `mcp.backend`, so one list covers
 * every backend and a per-backend rule is a rule that names its backend. They come on top of
 * each backend's `access` block (scopes, tenants, claims, tool lists), which keeps working
 * unchanged: a call must pass both. `policy.default` decides when no rule matches: `allow`,
 * so adding the block changes nothing until a rule says so (as today, where a backend without
 * tool lists allows every tool); `deny` makes the rules an allow list.
 *
 * Every `when` is compiled here, so a rule that does not compile stops the start with its key
 * and the position of the problem (cel.ts).
 */
import { z } from 'zod';
import { compileCel } from './cel.js';

const RULE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

const ruleSchema = z
  .object({
    name: z.string().regex(RULE_NAME, 'must be 1-64 letters, digits or _ . : - (it is written into audit records)'),
    effect: z.enum(['allow', 'deny']),
    when: z.string().min(1, 'must be a CEL expression'),
  })
  .strict()
  .superRefine((rule, ctx) => {
    const compiled = compileCel(rule.when);
    if ('problem' in compiled) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['when'], message: `rule "${rule.name}" does not compile: ${compiled.problem}` });
    }
  });

export const policySchema = z
  .object({
    rules: z
      .array(ruleSchema)
      .default([])
      .superRefine((rules, ctx) => {
        const seen = new Set<string>();
        rules.forEach((r, i) => {
          if (seen.has(r.name)) ctx.addIssue({ code: z.ZodIssueCode.custom, path: [i, 'name'], message: `"${r.name}" is used by an earlier rule (audit records name the rule that decided)` });
          seen.add(r.name);
        });
      }),
    default: z.enum(['allow', 'deny']).default('allow'),
  })
  .strict();

export const auditSchema = z
  .object({
    /** `otlp`: OTLP logs to `{telemetry.otlp.endpoint}/v1/logs` (needs `telemetry`; docs/telemetry.md). */
    sink: z.enum(['none', 'stdout', 'file', 'otlp']).default('none'),
    /** For `sink: file`: appended to, never truncated. */
    path: z.string().min(1).optional(),
    /** Claims copied into each record as they are in the token (e.g. email, tenant). */
    claims: z.array(z.string().min(1)).default([]),
    arguments: z
      .object({
        /** Also write the arguments themselves (their SHA-256 is always written). */
        include: z.boolean().default(false),
        /** Canonical JSON longer than this is left out (`argumentsTruncated: true`). */
        maxBytes: z.number().int().min(64, 'must be at least 64').max(1024 * 1024, 'must be at most 1048576').default(4096),
      })
      .strict()
      .default({}),
  })
  .strict()
  .superRefine((a, ctx) => {
    if (a.sink === 'file' && !a.path) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['path'], message: 'is required for sink file' });
  });
