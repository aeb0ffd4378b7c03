/**
 * `policy.rules` (issue 30 §3; docs/policy-and-audit.md): ordered CEL rules, compiled once at
 * start (an expression that does not compile was refused by the config already, with its
 * position: config/cel.ts). The first rule whose `when` is true decides; none → `policy.default`.
 *
 * An expression that fails while it runs (a claim the token lacks, an argument the call
 * lacks, a type mismatch) fails closed: a failing `deny` rule counts as matching, a failing
 * `allow` rule as not matching. `has(jwt.groups)` tests for a claim without failing.
 *
 * Listing (`tools/list`): a tool is listed when some call of it could be allowed. Each tool is
 * judged as a `tools/call` of it whose arguments are unknown: a rule that reads
 * `mcp.tool.arguments` and cannot be decided without them is "maybe" — a maybe-`allow` lists
 * the tool, a maybe-`deny` is passed over (some arguments would not match it). Rules that do
 * not read the arguments decide as for a call. So listing errs towards showing a tool, never
 * towards hiding one a call could use; the call itself is judged with its arguments.
 *
 * `confirm` (issue 46) judges `tools/call` only, and is passed over for every other request: a
 * person approves a call of a tool, with its arguments. A `confirm` rule that fails on a call
 * counts as matching (the call is held: fail closed), and for listing it counts as `allow` (a
 * call it matches can go through once approved).
 * `prompts/list` entries are judged the same way as a `prompts/get` of the prompt, and
 * `resources/templates/list` entries as a `resources/read` whose URI is unknown: a rule that
 * reads `mcp.resource.uri` is then the "maybe" (rule-policy-backend.ts).
 */
import { createHash } from 'node:crypto';
import type { Config } from '../config/schema.js';
import { CEL_VARIABLES, compileCel, type CelProgram } from '../config/cel.js';
import { canonicalJson } from '../ops/canonical-json.js';

type Rule = Config['policy']['rules'][number];

export interface RuleDecision {
  effect: Rule['effect'];
  /** The deciding rule's name, or `policy.default`. */
  rule: string;
  /** A `confirm` rule's terms: how long its approval is good for, and who else must approve. */
  confirm?: { ttlMs: number; approvers?: Record<string, string[]> };
}

interface CompiledRule {
  name: string;
  effect: Rule['effect'];
  program: CelProgram;
  /** The unknowns the rule's text names: `arguments`, `uri`. */
  reads: ReadonlySet<Unknown>;
  /** What the rule decides when it matches: made once, frozen (no object per call, issue 44 part 1). */
  decision: Readonly<RuleDecision>;
  /** Whether the rule's text names no variable but `jwt` ({@link NOT_CLAIMS}): its value is then the claims' alone. */
  claimsOnly: boolean;
  /** The claims the rule was last run on, and its value for them ({@link valueOf}). */
  lastClaims: unknown;
  lastValue: boolean | undefined;
}

/** What listing may not know of a request: a call's arguments, or a template's URI. */
export type Unknown = 'arguments' | 'uri';
const READS: ReadonlyArray<[Unknown, RegExp]> = [
  ['arguments', /\barguments\b/],
  ['uri', /\buri\b/],
];
/**
 * The variables other than `jwt`, by the same word test, made from config/cel.ts CEL_VARIABLES so
 * that a variable added there keeps every rule naming it running: a rule whose text names none
 * of them reads the token's claims alone. CEL has no ambient input (no clock, no randomness, no
 * I/O: cel-js registers none), so such a rule has one value per claims object, and the
 * verified-token cache hands out one object per token (auth/token-verifier.ts, frozen there). A
 * word that only appears inside a string literal just makes the rule run every time.
 */
const NOT_CLAIMS = new RegExp(`\\b(?:${CEL_VARIABLES.filter((name) => name !== 'jwt').join('|')})\\b`);

export class CelRules {
  readonly #rules: CompiledRule[];
  readonly #default: Readonly<RuleDecision>;
  /**
   * The digest of the whole `policy` block (RFC 8785 canonical JSON, SHA-256): an approval is
   * bound to it (issue 46 §4), so a reload that changes any rule needs a new approval.
   */
  readonly version: string;
  /**
   * Whether some rule names `request` (its headers): when none does, a request's variables
   * leave them out (policy-input.ts; issue 44 part 1), by the same word test as {@link READS}.
   */
  readonly readsRequest: boolean;

  constructor(policy: Config['policy']) {
    this.version = createHash('sha256').update(canonicalJson(policy)).digest('base64url');
    this.#rules = policy.rules.map((r) => {
      const compiled = compileCel(r.when);
      // The config schema compiled every rule already; this only guards hand-built configs.
      if ('problem' in compiled) throw new Error(`policy rule "${r.name}": ${compiled.problem}`);
      const reads = new Set(READS.filter(([, word]) => word.test(r.when)).map(([unknown]) => unknown));
      const confirm = r.effect === 'confirm' ? { ttlMs: r.ttl!, ...(r.approvers ? { approvers: r.approvers.claims } : {}) } : undefined;
      const decision = Object.freeze({ effect: r.effect, rule: r.name, ...(confirm ? { confirm: Object.freeze(confirm) } : {}) });
      return { name: r.name, effect: r.effect, program: compiled.program, reads, decision, claimsOnly: !NOT_CLAIMS.test(r.when), lastClaims: undefined, lastValue: undefined };
    });
    this.#default = Object.freeze({ effect: policy.default, rule: 'policy.default' });
    this.readsRequest = policy.rules.some((r) => /\brequest\b/.test(r.when));
  }

  get size(): number {
    return this.#rules.length;
  }

  /** The decision for one request, its variables complete. */
  decide(vars: Record<string, unknown>): Readonly<RuleDecision> {
    for (const rule of this.#rules) {
      if (rule.effect === 'confirm' && !isToolCall(vars)) continue;
      const value = valueOf(rule, vars);
      if (value === true || (value === undefined && rule.effect !== 'allow')) return rule.decision;
    }
    return this.#default;
  }

  /** Whether some request could be allowed, `unknown` not known (see the module comment). */
  couldAllow(vars: Record<string, unknown>, unknown: Unknown = 'arguments'): boolean {
    for (const rule of this.#rules) {
      if (rule.effect === 'confirm' && !isToolCall(vars)) continue;
      const value = valueOf(rule, vars);
      if (value === true) return rule.effect !== 'deny';
      if (value === undefined) {
        if (rule.reads.has(unknown)) {
          if (rule.effect !== 'deny') return true;
          continue;
        }
        if (rule.effect === 'deny') return false;
        if (rule.effect === 'confirm') return true;
      }
    }
    return this.#default.effect === 'allow';
  }
}

/** Whether the variables are those of a `tools/call` (policy-input.ts), the only request a `confirm` rule judges. */
function isToolCall(vars: Record<string, unknown>): boolean {
  return (vars.mcp as { method?: unknown } | undefined)?.method === 'tools/call';
}

/**
 * The rule's value for `vars`: run, unless it reads the claims alone and they are the very
 * object it last ran on (issue 44 part 1: a rule on `jwt.groups` ran for every call of a token,
 * about a third of the three rules' cost). One pair kept per rule, compared by identity: nothing
 * is hashed, and another user's claims are another object, so they run.
 */
function valueOf(rule: CompiledRule, vars: Record<string, unknown>): boolean | undefined {
  if (!rule.claimsOnly) return run(rule.program, vars);
  const claims = vars.jwt;
  if (claims !== rule.lastClaims || claims === undefined) {
    rule.lastValue = run(rule.program, vars);
    rule.lastClaims = claims;
  }
  return rule.lastValue;
}

/** true, false, or undefined when the expression failed or is not a boolean. */
function run(program: CelProgram, vars: Record<string, unknown>): boolean | undefined {
  try {
    const value = program(vars);
    return typeof value === 'boolean' ? value : undefined;
  } catch {
    return undefined;
  }
}
