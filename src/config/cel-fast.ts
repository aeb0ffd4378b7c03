/**
 * The common forms of a policy rule, run as plain closures (issue 44 part 1): cel-js reads every
 * operand's type at run time and looks its overload up, because the variables are `map`s of
 * `dyn` (cel.ts). The governance bench's three rules, with the request's facts and variables,
 * cost 6.2–6.4 k instructions a call on cel-js and 2.3–2.9 k with these closures
 * (bench/micro-count.ts `rules`, three counts each).
 *
 * It is a shortcut, never a second judge. A closure is made only for an expression built from
 * the forms below; anything else runs on cel-js alone. And a closure answers only where its
 * answer is known to be cel-js's (`test/config/cel-fast.test.ts` runs random expressions on
 * random claims through both and compares): for any value it does not model — a number compared
 * with a string, a string ordered by `<`, a map with its own `constructor` key, a value that did
 * not come from JSON — it says {@link UNSURE}, and cel-js evaluates the whole expression. So a
 * rule decides as it did before, whatever its input.
 *
 * The forms: literals (string, bool, null, int, double, a negative number); the variables;
 * `a.b` and `a["b"]` on a map; `has(a.b)`; `!`, `&&`, `||`, `?:`; `==` and `!=` between two strings, two bools, two
 * numbers or with `null`; `<`, `<=`, `>`, `>=` between numbers; `x in list` and `key in map`;
 * `size()` of a string, list or map; a string's `startsWith`, `endsWith` and `contains`.
 *
 * CEL's semantics kept (cel-spec langdef.md, "Logical operators", "Field selection"): a missing
 * key is an error, not `null`; `&&` and `||` are commutative over errors — `false && e` and
 * `e && false` are false, `true || e` and `e || true` are true; `size()` of a string counts code
 * points; an int (a literal, `size()`) and a double (every JSON number) compare by value, so
 * ints are held as numbers here (an int literal beyond 2^53 is not a form).
 */

/** A CEL error: cel-js would throw (a missing key, an operator on the wrong type). The rule fails. */
export const CEL_ERROR: unique symbol = Symbol('cel error');
/** What this evaluator does not model: the expression goes to cel-js instead. */
export const UNSURE: unique symbol = Symbol('unsure');

type Value = unknown;
type Result = Value | typeof CEL_ERROR | typeof UNSURE;
/** One compiled node: its value for the request's variables. */
type Node = (vars: Record<string, unknown>) => Result;

/** A node of cel-js's parse tree (`Environment.parse(...).ast`): an operator and its arguments. */
interface CelAst {
  op: string;
  args: unknown;
}

/** Not a form of this evaluator: the rule runs on cel-js alone. */
class NotFast extends Error {}

/**
 * The closure for a parsed expression (`program.ast` of cel-js), or undefined when it uses a
 * form this evaluator does not have. `variables`: the names a rule may read (cel.ts).
 */
export function compileFast(ast: unknown, variables: readonly string[]): Node | undefined {
  try {
    return compile(ast, new Set(variables));
  } catch (err) {
    if (err instanceof NotFast) return undefined;
    throw err;
  }
}

function compile(node: unknown, variables: ReadonlySet<string>): Node {
  const ast = node as CelAst;
  const args = ast?.args as unknown[];
  switch (ast?.op) {
    case 'value':
      return literal(ast.args);
    case 'id':
    case '.':
    case '[]':
      return path(ast, variables);
    case '!_':
      return not(compile(ast.args, variables));
    case '-_':
      return negative(ast.args);
    case '&&':
      return logical(compile(args[0], variables), compile(args[1], variables), false);
    case '||':
      return logical(compile(args[0], variables), compile(args[1], variables), true);
    case '?:':
      return conditional(compile(args[0], variables), compile(args[1], variables), compile(args[2], variables));
    case '==':
      return binary(compile(args[0], variables), compile(args[1], variables), equal);
    case '!=':
      return binary(compile(args[0], variables), compile(args[1], variables), notEqual);
    case '<':
    case '<=':
    case '>':
    case '>=':
      return compare(ast.op, compile(args[0], variables), compile(args[1], variables));
    case 'in':
      return member(compile(args[0], variables), compile(args[1], variables));
    case 'call':
      return call(args[0] as string, args[1] as unknown[], variables);
    case 'rcall':
      return receiverCall(args[0] as string, compile(args[1], variables), args[2] as unknown[], variables);
    default:
      throw new NotFast();
  }
}

/**
 * A literal: string, bool, null, int or double; a uint or bytes is not a form here. An int (a
 * BigInt in cel-js) is held as a number: within these forms an int and a double differ in
 * nothing but their type (cel-js compares them by value, `1 == 1.0` and `1 in [1.0]` are true),
 * and a number compares without the runtime calls every BigInt operation costs.
 */
function literal(value: unknown): Node {
  const kind = typeof value;
  if (kind === 'bigint') {
    const n = exactly(value as bigint);
    if (n === undefined) throw new NotFast();
    return () => n;
  }
  if (value === null || kind === 'string' || kind === 'boolean' || (kind === 'number' && Number.isFinite(value))) return () => value;
  throw new NotFast();
}

/** `-` before a number literal (`-2`, `-1.5`), folded; before anything else it is not a form here. */
function negative(of: unknown): Node {
  const value = (of as CelAst | undefined)?.op === 'value' ? (of as CelAst).args : undefined;
  if (typeof value === 'bigint' || typeof value === 'number') return literal(-value);
  throw new NotFast();
}

/**
 * A variable and the keys selected under it (`mcp.tool.name`, `request.headers["x-team"]`), as
 * one closure: `a.b.c` walked in a loop, not a closure per key.
 */
function path(ast: CelAst, variables: ReadonlySet<string>): Node {
  const keys: string[] = [];
  let at = ast;
  while (at?.op === '.' || at?.op === '[]') {
    const [of, key] = at.args as [CelAst, unknown];
    const name = at.op === '.' ? key : (key as CelAst | undefined)?.op === 'value' ? (key as CelAst).args : undefined;
    if (typeof name !== 'string') throw new NotFast();
    keys.unshift(name);
    at = of;
  }
  if (at?.op !== 'id' || !variables.has(at.args as string)) throw new NotFast();
  const variable = at.args as string;
  if (keys.includes('__proto__')) throw new NotFast();
  return (vars) => {
    // A variable the request's variables leave out (policy-input.ts) is cel-js's to report.
    let value: Result = vars[variable];
    if (value === undefined) return UNSURE;
    for (let i = 0; i < keys.length; i++) {
      value = field(value, keys[i]!);
      if (value === CEL_ERROR || value === UNSURE) return value;
    }
    return value;
  };
}

/**
 * A map's own key, as JSON made it; a missing key is an error. `__proto__` is not a form here
 * (on a JSON map it may be an own key or the prototype); every other name an object inherits is
 * a function, which no JSON value is, so the own-key test is needed only for a function or an
 * undefined.
 */
function field(map: Result, key: string): Result {
  if (!isJsonMap(map)) return UNSURE;
  const value = map[key];
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : UNSURE;
    case 'object':
      return value === null || Array.isArray(value) || isJsonMap(value) ? value : UNSURE;
    case 'undefined':
      return Object.hasOwn(map, key) ? UNSURE : CEL_ERROR;
    default:
      return UNSURE;
  }
}

function not(of: Node): Node {
  return (vars) => {
    const value = of(vars);
    if (typeof value === 'boolean') return !value;
    return value === UNSURE ? UNSURE : CEL_ERROR;
  };
}

/**
 * `&&` (`absorbing` false) and `||` (true): the absorbing value if either side has it, whatever
 * the other is (an error too); the other value if both have that.
 */
function logical(left: Node, right: Node, absorbing: boolean): Node {
  return (vars) => {
    const a = left(vars);
    if (a === absorbing) return absorbing;
    const b = right(vars);
    if (b === absorbing) return absorbing;
    if (a === !absorbing && b === !absorbing) return !absorbing;
    return a === UNSURE || b === UNSURE ? UNSURE : CEL_ERROR;
  };
}

function conditional(test: Node, then: Node, otherwise: Node): Node {
  return (vars) => {
    const value = test(vars);
    if (value === true) return then(vars);
    if (value === false) return otherwise(vars);
    return value === UNSURE ? UNSURE : CEL_ERROR;
  };
}

/**
 * An operator of two operands, both evaluated (neither absorbs the other's error): cel-js's
 * answer unknown if either's is, an error if either is one, else `apply`'s.
 */
function binary(left: Node, right: Node, apply: (a: Value, b: Value) => Result): Node {
  return (vars) => {
    const a = left(vars);
    const b = right(vars);
    if (a === UNSURE || b === UNSURE) return UNSURE;
    if (a === CEL_ERROR || b === CEL_ERROR) return CEL_ERROR;
    return apply(a, b);
  };
}

/** `==` for two strings, two bools, two numbers (int or double), or two nulls. */
function equal(a: Value, b: Value): Result {
  const kind = typeof a;
  if (kind === typeof b && (kind === 'string' || kind === 'boolean' || kind === 'number')) return a === b;
  return a === null && b === null ? true : UNSURE;
}

const notEqual = (a: Value, b: Value): Result => {
  const same = equal(a, b);
  return same === UNSURE ? UNSURE : !same;
};

/** `<`, `<=`, `>`, `>=` between numbers (int or double). */
const ORDER: Record<string, (a: number, b: number) => boolean> = {
  '<': (a, b) => a < b,
  '<=': (a, b) => a <= b,
  '>': (a, b) => a > b,
  '>=': (a, b) => a >= b,
};

function compare(op: string, left: Node, right: Node): Node {
  const order = ORDER[op]!;
  return binary(left, right, (a, b) => (typeof a === 'number' && typeof b === 'number' ? order(a, b) : UNSURE));
}

/** `x in list` (a string, bool or number among primitives: equal as `==` has them) and `key in map` (a string key). */
function member(needle: Node, haystack: Node): Node {
  return binary(needle, haystack, (x, within) => {
    // cel-js types a list or map operand by its first element, deeply (debugTypeDeep): one it cannot type fails the operator.
    if (!firstTypable(within)) return UNSURE;
    if (Array.isArray(within)) {
      const kind = typeof x;
      if (kind !== 'string' && kind !== 'boolean' && kind !== 'number') return UNSURE;
      for (const element of within) {
        if (element === x) return true;
        // Another kind of element (a map, a list) is compared by rules not modelled here.
        if (element !== null && typeof element === 'object') return UNSURE;
      }
      return false;
    }
    // As cel-js's `mapIncludes`: an own key whose value is defined.
    if (isJsonMap(within) && typeof x === 'string') return Object.hasOwn(within, x) && within[x] !== undefined;
    return UNSURE;
  });
}

/** `has(a.b)` and `size(x)`; no other global function is a form here. */
function call(name: string, args: unknown[], variables: ReadonlySet<string>): Node {
  if (args.length !== 1) throw new NotFast();
  if (name === 'has') {
    const selected = args[0] as CelAst;
    if (selected?.op !== '.' || (selected.args as unknown[])[1] === '__proto__') throw new NotFast();
    const [under, key] = selected.args as [unknown, string];
    const map = compile(under, variables);
    return (vars) => {
      const of = map(vars);
      if (of === CEL_ERROR || of === UNSURE) return of;
      const value = field(of, key);
      // A missing key is has()'s false; the key's value is read too, as cel-js reads it.
      if (value === CEL_ERROR) return false;
      return value === UNSURE ? UNSURE : true;
    };
  }
  if (name === 'size') return sizeOf(compile(args[0], variables));
  throw new NotFast();
}

/** `size()`: a string's code points, a list's elements, a map's keys (an int, held as a number). */
function sizeOf(of: Node): Node {
  return (vars) => {
    const value = of(vars);
    if (typeof value === 'string') return codePoints(value);
    // As for `in`: cel-js types the operand by its first element, deeply.
    if (!firstTypable(value)) return UNSURE;
    if (Array.isArray(value)) return value.length;
    if (isJsonMap(value)) return Object.keys(value).length;
    return value === CEL_ERROR ? CEL_ERROR : UNSURE;
  };
}

const STRING_METHODS: Record<string, (s: string, arg: string) => boolean> = {
  startsWith: (s, arg) => s.startsWith(arg),
  endsWith: (s, arg) => s.endsWith(arg),
  contains: (s, arg) => s.includes(arg),
};

/** `s.startsWith(t)`, `s.endsWith(t)`, `s.contains(t)` on strings. */
function receiverCall(name: string, receiver: Node, args: unknown[], variables: ReadonlySet<string>): Node {
  const method = Object.hasOwn(STRING_METHODS, name) ? STRING_METHODS[name] : undefined;
  if (!method || args.length !== 1) throw new NotFast();
  const argument = compile(args[0], variables);
  return binary(receiver, argument, (s, arg) => (typeof s === 'string' && typeof arg === 'string' ? method(s, arg) : UNSURE));
}

/**
 * An object cel-js takes as a map it reads by key: one whose `constructor` is `Object` or absent,
 * as cel-js's own type test has it (`debugType` in its operators.js). A JSON object with its own
 * `constructor` key is not one: cel-js fails on it, and so this says no, and the rule goes to
 * cel-js. A `Map` (which cel-js reads by `get`) is not a value of the variables either.
 */
function isJsonMap(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const made = (value as { constructor?: unknown }).constructor;
  return made === Object || made === undefined;
}

/**
 * Whether cel-js can type a list or map by its first element, and that element's first, and so
 * on (`debugTypeDeep`, which every operator and function on a `dyn` operand calls): each must be
 * a value it knows, a map by {@link isJsonMap}. An empty list or map, or a list whose first
 * element is undefined, is typed without one; a map's first value that is undefined is not.
 */
function firstTypable(value: unknown): boolean {
  let at = value;
  for (;;) {
    let first: unknown;
    if (Array.isArray(at)) {
      first = at[0];
      if (first === undefined) return true;
    } else if (isJsonMap(at)) {
      let found = false;
      // The first key as cel-js takes it (`for…in`).
      for (const key in at) {
        first = at[key];
        found = true;
        break;
      }
      if (!found) return true;
    } else return true;
    switch (typeof first) {
      case 'string':
      case 'number':
      case 'boolean':
        return true;
      case 'object':
        if (first === null) return true;
        if (!Array.isArray(first) && !isJsonMap(first)) return false;
        at = first;
        continue;
      default:
        return false;
    }
  }
}

/** An int literal as a number, where a double holds it exactly. */
function exactly(n: bigint): number | undefined {
  return n >= -9_007_199_254_740_991n && n <= 9_007_199_254_740_991n ? Number(n) : undefined;
}

/** A UTF-16 surrogate, paired or not. */
const SURROGATE = /[\ud800-\udfff]/;

/**
 * A string's length in Unicode code points (CEL's `size`), not UTF-16 units: a pair of
 * surrogates is one. Most strings have none, which one regular-expression test (native code)
 * tells, where a loop of `charCodeAt` costs about 27 instructions a character.
 */
function codePoints(s: string): number {
  if (!SURROGATE.test(s)) return s.length;
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}
