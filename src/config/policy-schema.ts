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
 *
 * `effect: confirm` (issue 46) holds a matching `tools/call` until a person approves it out of
 * band, on a signed-in page (policy/confirm-hold.ts). Its `ttl` is how long the request and
 * the approval are good for; with `approvers` (four-eyes) someone else decides: a signed-in
 * user whose ID-token claims match, never the caller (policy/approvers.ts; the claims named
 * are kept in the browser session, policy/policy-claims.ts).
 */
import { z } from 'zod';
import { compileCel } from './cel.js';
import { DURATION_JSON_SCHEMA, parseDuration } from './duration.js';
import { httpUrl } from './http-url.js';
import { jsonHint } from './json-hints.js';

const RULE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

const ruleSchema = z
  .object({
    name: z.string().regex(RULE_NAME, 'must be 1-64 letters, digits or _ . : - (it is written into audit records)'),
    effect: z.enum(['allow', 'deny', 'confirm']),
    when: z.string().min(1, 'must be a CEL expression'),
    /** `confirm` only: how long a held call waits for its approval, and the approval for the retry. */
    ttl: jsonHint(z.union([z.string(), z.number()]), { kind: 'replace', json: DURATION_JSON_SCHEMA })
      .transform((value, ctx) => {
        const ms = parseDuration(value);
        if (ms === undefined || ms < 10_000 || ms > 86_400_000) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `"${value}" must be a duration between 10s and 24h (e.g. 10m)` });
        return ms ?? 0;
      })
      .optional(),
    /** `confirm` only: who else must approve (four-eyes): claims of the approver's ID token, each a list of accepted values. */
    approvers: z
      .object({ claims: z.record(z.array(z.string().min(1)).min(1, 'must list at least one value')).refine((c) => Object.keys(c).length > 0, 'must name at least one claim') })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((rule, ctx) => {
    const compiled = compileCel(rule.when);
    if ('problem' in compiled) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['when'], message: `rule "${rule.name}" does not compile: ${compiled.problem}` });
    }
    for (const key of ['ttl', 'approvers'] as const) {
      if (rule.effect !== 'confirm' && rule[key] !== undefined) ctx.addIssue({ code: z.ZodIssueCode.custom, path: [key], message: `is for effect confirm only (rule "${rule.name}" is ${rule.effect})` });
    }
  })
  .transform((rule) => (rule.effect === 'confirm' ? { ...rule, ttl: rule.ttl ?? DEFAULT_CONFIRM_TTL_MS } : rule));

/** How long a `confirm` rule's request and approval are good for when it names no `ttl`. */
export const DEFAULT_CONFIRM_TTL_MS = 10 * 60_000;

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
    /**
     * For `sink: file`: how long a record may wait for others to share its write (a batch also
     * leaves at about 64 KiB). `0` writes at the end of each event-loop turn: under load that is
     * about one write(2) per record (issue 44 part 1). A SIGKILL loses at most this much.
     */
    flushInterval: jsonHint(z.union([z.string(), z.number()]), { kind: 'replace', json: DURATION_JSON_SCHEMA })
      .default('100ms')
      .transform((value, ctx) => {
        const ms = parseDuration(value);
        if (ms === undefined || ms > 1_000) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `"${value}" must be a duration of at most 1s (e.g. 100ms; 0 writes at the end of each event-loop turn)` });
        return ms ?? 0;
      }),
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

/**
 * `approvals` (issue 46 §3): `notify` POSTs each new request of a `confirm` rule to a webhook
 * (policy/approval-notify.ts) — its id, link, rule, backend, tool, the caller's name and the
 * expiry, never the arguments — through the gateway's outbound SSRF guard, within `timeout`.
 */
export const approvalsSchema = z
  .object({
    notify: z
      .object({
        /** Where each new request is POSTed as JSON (https; http only to a loopback host while `publicUrl` is loopback http). */
        url: httpUrl,
        /** The whole exchange, after which it is given up (and counted as failed). */
        timeout: jsonHint(z.union([z.string(), z.number()]), { kind: 'replace', json: DURATION_JSON_SCHEMA })
          .default('5s')
          .transform((value, ctx) => {
            const ms = parseDuration(value);
            if (ms === undefined || ms < 1_000 || ms > 30_000) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `"${value}" must be a duration between 1s and 30s (e.g. 5s)` });
            return ms ?? 0;
          }),
      })
      .strict()
      .optional(),
  })
  .strict();
