/**
 * The rules' closures (src/config/cel-fast.ts) against cel-js itself: for random expressions of
 * the closures' forms and of forms beside them, on random claims, arguments and headers, a rule
 * compiled by compileCel must come out as cel-js alone says — true, false, or failing — and the
 * closures must answer a share of them themselves (else they would save nothing): over a quarter
 * of these runs, whose random values are often ones the closures leave to cel-js.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { celEnvironment, CEL_VARIABLES, compileCel, type CelProgram } from '../../src/config/cel.js';
import { CEL_ERROR, compileFast, UNSURE } from '../../src/config/cel-fast.js';

/** A rule's outcome as cel-rules.ts reads it: a boolean, or failing. */
type Outcome = boolean | 'fails';

function outcomeOf(program: CelProgram, vars: Record<string, unknown>): Outcome {
  try {
    const value = program(vars);
    return typeof value === 'boolean' ? value : 'fails';
  } catch {
    return 'fails';
  }
}

/** cel-js alone, as the gateway ran every rule before the closures. */
function celJs(source: string): CelProgram {
  const program = celEnvironment().parse(source);
  return (vars) => program(vars);
}

function compiled(source: string): CelProgram {
  const result = compileCel(source);
  assert.ok('program' in result, `${source}: ${'problem' in result ? result.problem : ''}`);
  return result.program;
}

/** A small seeded generator (mulberry32), so a failing case can be run again from its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `constructor` and `__proto__`: keys a client may send in arguments, which cel-js reads in its own way. */
const KEYS = ['a', 'b', 'groups', 'n', 's', 'constructor', '__proto__'];
const STRINGS = ['', 'bench', 'ops', 'héllo', '😀x', 'x😀', '\ud800', 'ben', 'file:///tmp'];
const NUMBERS = [0, 1, 5, 1.5, -2, 1000, 1001, 2 ** 53 + 2, 1e300, -0];

function pick<T>(next: () => number, from: readonly T[]): T {
  return from[Math.floor(next() * from.length)]!;
}

/** A JSON value as claims or arguments hold them. */
function jsonValue(next: () => number, depth: number): unknown {
  const r = next();
  if (r < 0.3) return pick(next, STRINGS);
  if (r < 0.5) return pick(next, NUMBERS);
  if (r < 0.58) return next() < 0.5;
  if (r < 0.64) return null;
  if (r < 0.82 || depth === 0) {
    return Array.from({ length: Math.floor(next() * 4) }, () => {
      const e = next();
      return e < 0.6 ? pick(next, STRINGS) : e < 0.8 || depth === 0 ? pick(next, NUMBERS) : jsonValue(next, depth - 1);
    });
  }
  return jsonObject(next, depth - 1);
}

function jsonObject(next: () => number, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // Own keys as JSON.parse makes them (`__proto__` too), not by assignment.
  for (const key of KEYS) if (next() < (key.startsWith('_') || key === 'constructor' ? 0.15 : 0.6)) Object.defineProperty(out, key, { value: jsonValue(next, depth), enumerable: true, writable: true, configurable: true });
  return out;
}

function variables(next: () => number): Record<string, unknown> {
  return {
    jwt: jsonObject(next, 2),
    mcp: { method: 'tools/call', backend: 'b', tool: { name: pick(next, ['echo', 'add', '']), arguments: jsonObject(next, 1) }, prompt: { name: '' }, resource: { uri: pick(next, STRINGS) } },
    request: { headers: { 'x-team': pick(next, STRINGS), accept: 'application/json' } },
    source: { address: '127.0.0.1' },
  };
}

const PATHS = ['jwt.a', 'jwt.b', 'jwt.groups', 'jwt.n', 'jwt.s', 'jwt.a.b', 'jwt.a.groups', 'jwt["s"]', 'jwt.missing', 'mcp.tool.name', 'mcp.tool.arguments.s', 'mcp.tool.arguments.n', 'mcp.tool.arguments.a', 'mcp.tool.arguments.constructor', 'jwt.__proto__', 'mcp.resource.uri', 'request.headers["x-team"]', 'source.address'];
const LITERALS = ['"bench"', '""', '"héllo"', '"😀x"', '1', '2', '3', '5', '1000', '1.5', '-2', '-1.5', 'null', 'true', 'false', '1u', '["bench", "ops"]', '{"a": 1}', 'b"x"'];
const COMPARISONS = ['==', '!=', '<', '<=', '>', '>='];

/** A random expression: mostly the closures' forms, some others (lists, uints, macros, methods) that must go to cel-js. */
function expression(next: () => number, depth: number): string {
  const r = next();
  const term = () => (next() < 0.6 ? pick(next, PATHS) : next() < 0.8 ? pick(next, LITERALS) : `size(${pick(next, PATHS)})`);
  if (depth === 0 || r < 0.35) {
    const s = next();
    if (s < 0.45) return `${term()} ${pick(next, COMPARISONS)} ${term()}`;
    if (s < 0.6) return `${term()} in ${pick(next, PATHS)}`;
    if (s < 0.7) return `has(${pick(next, PATHS.filter((p) => p.includes('.')))})`;
    if (s < 0.8) return `${pick(next, PATHS)}.${pick(next, ['startsWith', 'endsWith', 'contains', 'matches', 'size'])}(${pick(next, ['"b"', '"x"', '""', '"😀"', pick(next, PATHS)])})`;
    if (s < 0.86) return pick(next, ['true', 'false']);
    if (s < 0.92) return pick(next, PATHS);
    return `${pick(next, PATHS)}.exists(x, x == "bench")`;
  }
  if (r < 0.55) return `${expression(next, depth - 1)} && ${expression(next, depth - 1)}`;
  if (r < 0.75) return `${expression(next, depth - 1)} || ${expression(next, depth - 1)}`;
  if (r < 0.87) return `!(${expression(next, depth - 1)})`;
  return `(${expression(next, depth - 1)}) ? (${expression(next, depth - 1)}) : (${expression(next, depth - 1)})`;
}

test('random rules on random claims decide as cel-js alone decides, and the closures answer a share of them themselves', () => {
  const next = random(44);
  const env = celEnvironment();
  let checked = 0;
  let runs = 0;
  let answered = 0;
  for (let i = 0; i < 2500; i++) {
    const source = expression(next, 3);
    if (!env.check(source).valid) continue;
    checked++;
    const fast = compileFast(env.parse(source).ast, CEL_VARIABLES);
    const program = compiled(source);
    const reference = celJs(source);
    for (let k = 0; k < 4; k++) {
      const vars = variables(next);
      runs++;
      assert.equal(outcomeOf(program, vars), outcomeOf(reference, vars), `${source} on ${JSON.stringify(vars)}`);
      if (fast && fast(vars) !== UNSURE) answered++;
    }
  }
  assert.ok(checked > 1000, `only ${checked} random expressions type-checked`);
  // Many random expressions mix in a form or a value the closures leave to cel-js (1,984 of 7,172 runs were theirs).
  assert.ok(answered > runs / 4, `the closures answered ${answered} of ${runs} runs`);
});

test('the forms of the governance rules and docs/policy-and-audit.md are answered by the closures, as cel-js answers them', () => {
  const claims = { sub: 'u1', groups: ['bench', 'ops'], tenant: 'acme', level: 3, email_verified: true, name: '😀x', scores: [1, 2.5] };
  const vars = {
    jwt: claims,
    mcp: { method: 'tools/call', backend: 'files', tool: { name: 'echo', arguments: { message: 'hi', path: '/tmp/a' } }, prompt: { name: '' }, resource: { uri: 'file:///srv/x' } },
    request: { headers: { 'x-team': 'red' } },
    source: { address: '10.0.0.1' },
  };
  const cases: Array<[string, Outcome]> = [
    ['mcp.tool.name == "echo" && size(mcp.tool.arguments.message) > 1000', false],
    ['!("bench" in jwt.groups)', false],
    ['true', true],
    ['"ops" in jwt.groups && jwt.tenant == "acme"', true],
    ['has(jwt.groups) && !has(jwt.missing)', true],
    ['jwt.level >= 3 && jwt.level < 4', true],
    ['jwt.email_verified', true],
    ['mcp.resource.uri.startsWith("file:///srv/")', true],
    ['mcp.tool.arguments.path.contains("..")', false],
    ['request.headers["x-team"] == "red" ? jwt.level > 1 : false', true],
    ['jwt.missing == "x"', 'fails'],
    ['jwt.missing == "x" || true', true],
    ['false && jwt.missing', false],
    ['jwt.level > -1.5', true],
    // A code point outside the BMP is one character to CEL, two UTF-16 units to JavaScript.
    ['size(jwt.name) == 2', true],
    // An int literal among JSON numbers (doubles): equal by value.
    ['1 in jwt.scores && 2.5 in jwt.scores && !(2 in jwt.scores)', true],
  ];
  for (const [source, expected] of cases) {
    const ast = celEnvironment().parse(source).ast;
    const fast = compileFast(ast, CEL_VARIABLES);
    assert.ok(fast, `${source} has a closure`);
    const answer = fast(vars);
    assert.notEqual(answer, UNSURE, `${source} is answered by its closure`);
    assert.equal(answer === CEL_ERROR ? 'fails' : answer, expected, source);
    assert.equal(outcomeOf(celJs(source), vars), expected, `cel-js: ${source}`);
    assert.equal(outcomeOf(compiled(source), vars), expected, `compiled: ${source}`);
  }
});

test('forms the closures do not have run on cel-js alone; values they do not model are left to it', () => {
  const env = celEnvironment();
  for (const source of ['jwt.groups.exists(g, g == "bench")', 'jwt.groups == ["bench"]', 'jwt.n == 1u', 'jwt.s.matches("^b")', 'int(jwt.n) > 1', 'jwt.n + 1 > 2', 'jwt[jwt.k] == "x"']) {
    assert.equal(compileFast(env.parse(source).ast, CEL_VARIABLES), undefined, source);
  }
  // An object with its own `constructor` key, as JSON.parse makes one: cel-js cannot type it.
  const odd = JSON.parse('{"constructor": "x"}') as unknown;
  const vars = { jwt: { n: 5, s: 'b', list: [{ a: 1 }, 'x'], when: new Date(0), nested: { a: odd }, odds: [odd], holey: { a: undefined } }, mcp: {}, request: {}, source: {} };
  for (const [source, expected] of [
    ['jwt.n == "5"', false],
    ['jwt.s < "c"', true],
    ['"x" in jwt.list', true],
    ['jwt.when == null', false],
    ['has(jwt.nested.a)', 'fails'],
    ['"x" in jwt.nested', 'fails'],
    ['size(jwt.odds) == 1', 'fails'],
    // Not JSON: a map whose first value is undefined, which cel-js cannot type.
    ['"a" in jwt.holey', 'fails'],
  ] as Array<[string, Outcome]>) {
    const fast = compileFast(env.parse(source).ast, CEL_VARIABLES)!;
    assert.ok(fast, source);
    assert.equal(fast(vars), UNSURE, `${source} is left to cel-js`);
    assert.equal(outcomeOf(compiled(source), vars), outcomeOf(celJs(source), vars), source);
    assert.equal(outcomeOf(compiled(source), vars), expected, source);
  }
});
