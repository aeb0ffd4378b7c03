/**
 * What `policy.rules` and the audit trail cost per `tools/call`, in process (issue 30 "Cost"):
 * the decorator (src/policy/rule-policy-backend.ts) around a backend that answers at once with
 * a fixed JSON result, so only the gateway's own work is timed — no network, no Redis. The
 * base is the backend not wrapped at all; then off (the face is on every backend so that a
 * reload can turn rules or the audit on, issue 32 §1: with neither it must cost nothing), the
 * issue's three rules, the audit alone (to a sink that drops the lines), both.
 *
 *   node --import tsx bench/policy-cost.ts
 *
 * CPU time of this process per call (user + system), in 10 rounds that rotate the setups;
 * medians. Bounded: a fixed number of calls per setup.
 */
import type { BackendCaller, BackendResponse, McpBackend } from '../src/backends/backend.js';
import { syntheticBody } from '../src/backends/body.js';
import { parseConfig } from '../src/config/load.js';
import type { ConfigInput } from '../src/config/schema.js';
import { Metrics } from '../src/ops/metrics.js';
import { rulePolicyFace } from '../src/policy/rule-policy-backend.js';

const CALLS = 50_000;
const ROUNDS = 10;
const RULES = [
  { name: 'admins-delete', effect: 'deny', when: 'mcp.tool.name.startsWith("delete_") && !("admins" in jwt.groups)' },
  { name: 'small-transfers', effect: 'allow', when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount < 1000' },
  { name: 'no-other-transfers', effect: 'deny', when: 'mcp.tool.name == "transfer"' },
] as const;
const BODY = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'transfer', arguments: { amount: 250, to: 'bob', memo: 'rent for november' } } });
const ANSWER = JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'transfer done' }] } });

function backendFor(extra: Partial<ConfigInput>, wrapped = true): McpBackend {
  const config = parseConfig({
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [{ name: 'bank', url: 'http://127.0.0.1:9/mcp' }],
    ...extra,
  });
  const inner: McpBackend = {
    name: 'bank',
    config: config.backends[0]!,
    post: async (): Promise<BackendResponse> => ({ status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(ANSWER) }),
    get: () => Promise.reject(new Error('unused')),
    delete: () => Promise.reject(new Error('unused')),
    close: async () => {},
  };
  const { face } = rulePolicyFace(config, new Metrics({ openStreams: () => 0, activeSessions: async () => 0 }), { override: extra.audit ? { write: () => true } : undefined });
  return wrapped ? face(inner) : inner;
}

const caller: BackendCaller = {
  principal: { iss: 'https://idp.example.com', sub: 'alice', userKey: 'k'.repeat(32), scopes: new Set(['mcp']), exp: 0, claims: { sub: 'alice', groups: ['ops'], email: 'a@x' } },
  sessionId: 'session-1',
  log: { info: () => {} } as never,
  headers: { 'user-agent': 'bench', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
  address: '127.0.0.1',
  url: '/mcp/bank',
};

/** CPU (user + system) per call in µs over `calls` calls: CPU, not wall time, so other processes on the host move it less. */
async function perCall(backend: McpBackend, calls: number): Promise<number> {
  const started = process.cpuUsage();
  for (let i = 0; i < calls; i++) await (await backend.post(BODY, { caller })).body.text();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / calls;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const setups: Array<[string, Partial<ConfigInput>, boolean?]> = [
  ['not wrapped (base)', {}, false],
  ['off (face, no rules or audit)', {}],
  ['3 rules', { policy: { rules: [...RULES] } }],
  ['audit (stdout sink, dropped)', { audit: { sink: 'stdout' } }],
  ['3 rules + audit', { policy: { rules: [...RULES] }, audit: { sink: 'stdout' } }],
];
const backends = setups.map(([, extra, wrapped]) => backendFor(extra, wrapped));
for (const b of backends) await perCall(b, 5_000);
// Rounds rotate the order; each setup's figure and its difference to the unwrapped base are medians over rounds.
const cpu: number[][] = setups.map(() => []);
for (let r = 0; r < ROUNDS; r++) {
  for (let k = 0; k < setups.length; k++) {
    const i = (k + r) % setups.length;
    cpu[i]!.push(await perCall(backends[i]!, CALLS / ROUNDS));
  }
}
for (const [i, [name]] of setups.entries()) {
  const added = median(cpu[i]!.map((us, r) => us - cpu[0]![r]!));
  console.log(`${name.padEnd(30)} ${median(cpu[i]!).toFixed(2)} µs CPU per call  (+${added.toFixed(2)} µs)`);
}
