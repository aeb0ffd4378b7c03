/**
 * The CEL dialect of `policy.rules[].when` (issue 30 §3; docs/policy-and-audit.md): which
 * variables an expression may name and how large it may be. It lives with the config because
 * an expression that does not compile is a config error, reported at start with the rule's
 * key and the line and column of the problem; src/policy/cel-rules.ts compiles the same way.
 *
 * Implementation: @marcbachmann/cel-js, chosen over @bufbuild/cel on bench/cel-compare.ts
 * (on this machine: compile ≈14 µs vs ≈230 µs per rule, evaluation ≈0.7 µs vs ≈6.5 µs per
 * rule on the rules), with parse-time structural limits; both are maintained.
 *
 * Bounded evaluation: CEL has no loops or recursion of its own; comprehension macros
 * (`exists`, `all`, `map`, `filter`) iterate over a finite input once. The limits below bound
 * the expression itself (nodes, nesting, literal sizes), so one rule's cost is bounded by its
 * size times the size of what it iterates over (a token's claims, a call's arguments — both
 * bounded by the body and header limits).
 */
import { Environment, ParseError, TypeError as CelTypeError } from '@marcbachmann/cel-js';
import { compileFast, UNSURE } from './cel-fast.js';

/** The top-level variables (docs/policy-and-audit.md "Variables"); all maps, read dynamically. */
export const CEL_VARIABLES = ['jwt', 'mcp', 'request', 'source'] as const;

const LIMITS = { maxAstNodes: 2_000, maxDepth: 64, maxListElements: 256, maxMapEntries: 256, maxCallArguments: 16 };

let shared: Environment | undefined;

/** The environment every rule is compiled in (built once; cel-js environments are reusable). */
export function celEnvironment(): Environment {
  if (!shared) {
    shared = new Environment({ limits: LIMITS, homogeneousAggregateLiterals: false });
    for (const name of CEL_VARIABLES) shared.registerVariable(name, 'map');
  }
  return shared;
}

/**
 * A rule's value for a request's variables; where the expression fails it throws (cel-js) or
 * returns cel-fast.ts's `CEL_ERROR`: a caller takes anything but a boolean as the rule failing.
 */
export type CelProgram = (vars: Record<string, unknown>) => unknown;

/**
 * The compiled expression, or the problem with its 1-based line and column. The program runs
 * the expression's closure (cel-fast.ts) where it has one and that knows the answer, and cel-js
 * otherwise.
 */
export function compileCel(source: string): { program: CelProgram } | { problem: string } {
  const env = celEnvironment();
  try {
    const checked = env.check(source);
    if (!checked.valid) return { problem: describe(source, checked.error) };
    const program = env.parse(source);
    const fast = compileFast(program.ast, CEL_VARIABLES);
    if (!fast) return { program: (vars) => program(vars) };
    return {
      program: (vars) => {
        const value = fast(vars);
        return value === UNSURE ? program(vars) : value;
      },
    };
  } catch (err) {
    if (err instanceof ParseError || err instanceof CelTypeError) return { problem: describe(source, err) };
    return { problem: err instanceof Error ? err.message.split('\n')[0]! : String(err) };
  }
}

function describe(source: string, err: unknown): string {
  const e = err as { range?: { start?: number }; message?: string };
  const summary = ((e.message ?? String(err)).split('\n')[0] ?? '').trim();
  const start = e.range?.start;
  if (typeof start !== 'number') return summary;
  const before = source.slice(0, start).split('\n');
  return `${summary} at line ${before.length}, column ${before.at(-1)!.length + 1}`;
}
