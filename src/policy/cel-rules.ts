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
 * `prompts/list` entries are judged the same way as a `prompts/get` of the prompt, and
 * `resources/templates/list` entries as a `resources/read` whose URI is unknown: a rule that
 * reads `mcp.resource.uri` is then the "maybe" (rule-policy-backend.ts).
 */
import type { Config } from '../config/schema.js';
import { compileCel, type CelProgram } from '../config/cel.js';

export interface RuleDecision {
  effect: 'allow' | 'deny';
  /** The deciding rule's name, or `policy.default`. */
  rule: string;
}

interface CompiledRule {
  name: string;
  effect: 'allow' | 'deny';
  program: CelProgram;
  /** The unknowns the rule's text names: `arguments`, `uri`. */
  reads: ReadonlySet<Unknown>;
}

/** What listing may not know of a request: a call's arguments, or a template's URI. */
export type Unknown = 'arguments' | 'uri';
const READS: ReadonlyArray<[Unknown, RegExp]> = [
  ['arguments', /\barguments\b/],
  ['uri', /\buri\b/],
];

export class CelRules {
  readonly #rules: CompiledRule[];
  readonly #default: RuleDecision;

  constructor(policy: Config['policy']) {
    this.#rules = policy.rules.map((r) => {
      const compiled = compileCel(r.when);
      // The config schema compiled every rule already; this only guards hand-built configs.
      if ('problem' in compiled) throw new Error(`policy rule "${r.name}": ${compiled.problem}`);
      const reads = new Set(READS.filter(([, word]) => word.test(r.when)).map(([unknown]) => unknown));
      return { name: r.name, effect: r.effect, program: compiled.program, reads };
    });
    this.#default = { effect: policy.default, rule: 'policy.default' };
  }

  get size(): number {
    return this.#rules.length;
  }

  /** The decision for one request, its variables complete. */
  decide(vars: Record<string, unknown>): RuleDecision {
    for (const rule of this.#rules) {
      const value = run(rule.program, vars);
      if (value === true || (value === undefined && rule.effect === 'deny')) return { effect: rule.effect, rule: rule.name };
    }
    return this.#default;
  }

  /** Whether some request could be allowed, `unknown` not known (see the module comment). */
  couldAllow(vars: Record<string, unknown>, unknown: Unknown = 'arguments'): boolean {
    for (const rule of this.#rules) {
      const value = run(rule.program, vars);
      if (value === true) return rule.effect === 'allow';
      if (value === undefined) {
        if (rule.reads.has(unknown)) {
          if (rule.effect === 'allow') return true;
          continue;
        }
        if (rule.effect === 'deny') return false;
      }
    }
    return this.#default.effect === 'allow';
  }
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
