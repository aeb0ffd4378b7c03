/**
 * Compile and evaluation speed of the two maintained CEL implementations for ECMAScript on
 * the rules of issue 30 §3 (delete_* only for admins; transfer only below 1000), so the choice
 * in src/policy/cel-rules.ts rests on figures measured here rather than on claims.
 *
 *   node --import tsx bench/cel-compare.ts
 *
 * Both packages must be installed while it runs (the project keeps only the chosen one; add
 * the other with `npm install --no-save` to repeat the comparison). Bounded: fixed loop counts.
 */
const RULES = [
  'mcp.method == "tools/call" && mcp.tool.name.startsWith("delete_") && !("admins" in jwt.groups)',
  'mcp.tool.name == "transfer" && mcp.tool.arguments.amount < 1000',
  'mcp.tool.name == "transfer"',
];
const VARS = {
  jwt: { sub: 'alice', groups: ['ops', 'eng'], org: 'acme' },
  mcp: { method: 'tools/call', backend: 'bank', tool: { name: 'transfer', arguments: { amount: 250, to: 'bob' } } },
  request: { headers: { 'user-agent': 'bench' } },
  source: { address: '127.0.0.1' },
};
const COMPILES = 2_000;
const EVALS = 200_000;

type Compile = (source: string) => (vars: typeof VARS) => unknown;

async function implementations(): Promise<Record<string, Compile>> {
  const found: Record<string, Compile> = {};
  try {
    // By name held in a variable: the package is not a dependency, so its types are not either.
    const name = '@bufbuild/cel';
    const { parse, plan, celEnv } = (await import(name)) as { parse(s: string): unknown; plan(env: unknown, expr: unknown): (v: unknown) => unknown; celEnv(): unknown };
    const env = celEnv();
    found['@bufbuild/cel'] = (source) => {
      const run = plan(env, parse(source));
      return (vars) => run(vars as never);
    };
  } catch {
    console.log('@bufbuild/cel is not installed: skipped');
  }
  try {
    const { Environment } = await import('@marcbachmann/cel-js');
    const env = new Environment({ unlistedVariablesAreDyn: true });
    found['@marcbachmann/cel-js'] = (source) => {
      const run = env.parse(source);
      return (vars) => run(vars);
    };
  } catch {
    console.log('@marcbachmann/cel-js is not installed: skipped');
  }
  return found;
}

function perOp(started: bigint, count: number): string {
  return `${(Number(process.hrtime.bigint() - started) / count / 1000).toFixed(2)} µs`;
}

for (const [name, compile] of Object.entries(await implementations())) {
  for (let i = 0; i < 200; i++) RULES.forEach(compile); // warm-up
  let started = process.hrtime.bigint();
  for (let i = 0; i < COMPILES; i++) for (const rule of RULES) compile(rule);
  const compileTime = perOp(started, COMPILES * RULES.length);
  const compiled = RULES.map(compile);
  const results = compiled.map((run) => String(run(VARS)));
  for (let i = 0; i < 20_000; i++) for (const run of compiled) run(VARS); // warm-up
  started = process.hrtime.bigint();
  for (let i = 0; i < EVALS; i++) for (const run of compiled) run(VARS);
  console.log(`${name}: compile ${compileTime} per rule, evaluate ${perOp(started, EVALS * RULES.length)} per rule; results ${results.join(', ')}`);
}
