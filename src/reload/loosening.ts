/**
 * What a reload loosens (issue 41 §6): a new file that drops or widens a rule is applied like
 * any other, but it is logged at `warn` naming each loosened item, and counted in
 * `switchboard_config_reloads_loosened_total{kind}`, so that a file cut short, or an edit that
 * opened more than meant, is seen (docs/operations-reload.md).
 *
 * - `policy`: a deny rule removed, turned into an allow rule or its `when` changed; an allow rule
 *   added, changed or moved before a deny rule it was after (the first matching rule decides),
 *   or anywhere while `policy.default` is deny; `policy.default` deny → allow.
 * - `access` (per backend kept): a required scope dropped; a tenant added, or the tenant list
 *   emptied (any tenant); a claim no longer required, or a value it accepts added; a tool
 *   pattern dropped from `tools.deny`; one added to `tools.allow`, or that list emptied (every tool).
 * - `pinning` (per backend kept): `mode` weaker (block → hold → log → off); `lockfile` removed or
 *   pointed at another file; `scope` user → backend (one user's first sight then judges every
 *   user's list: docs/pinning.md).
 *
 * A backend added or removed is named in the `config reloaded` line already, and is not a
 * loosening of a rule; a `when` that changed is named without judging whether it is wider.
 */
import { isDeepStrictEqual } from 'node:util';
import type { FastifyBaseLogger } from 'fastify';
import type { BackendConfig, Config } from '../config/schema.js';
import type { Metrics } from '../ops/metrics.js';

export type LooseningKind = 'policy' | 'access' | 'pinning';

export interface Loosening {
  kind: LooseningKind;
  /** The item, as a key path and what happened to it: `policy.rules["no-wipe"] removed`. */
  what: string;
}

type Rule = Config['policy']['rules'][number];

const PINNING_STRENGTH: Record<BackendConfig['pinning']['mode'], number> = { off: 0, log: 1, hold: 2, block: 3 };

const quoted = (values: readonly string[]) => values.map((v) => JSON.stringify(v)).join(', ');
const added = (was: readonly string[], is: readonly string[]) => is.filter((v) => !was.includes(v));

/** Every loosening of `next` against the config applied before it, in file order. */
export function looseningsOf(applied: Config, next: Config): Loosening[] {
  const out: Loosening[] = policyLoosenings(applied.policy, next.policy).map((what) => ({ kind: 'policy', what }));
  const before = new Map(applied.backends.map((b) => [b.name, b]));
  for (const is of next.backends) {
    const was = before.get(is.name);
    if (!was || isDeepStrictEqual(was, is)) continue;
    out.push(...accessLoosenings(was, is).map((what) => ({ kind: 'access', what }) as const));
    out.push(...pinningLoosenings(was, is).map((what) => ({ kind: 'pinning', what }) as const));
  }
  return out;
}

function policyLoosenings(was: Config['policy'], is: Config['policy']): string[] {
  const out: string[] = [];
  const now = new Map(is.rules.map((r) => [r.name, r]));
  const rule = (r: Rule) => `policy.rules[${JSON.stringify(r.name)}]`;
  for (const r of was.rules.filter((r) => r.effect === 'deny')) {
    const kept = now.get(r.name);
    if (!kept) out.push(`${rule(r)} (deny) removed`);
    else if (kept.effect !== 'deny') out.push(`${rule(r)} effect deny → allow`);
    else if (kept.when !== r.when) out.push(`${rule(r)}.when changed (deny)`);
  }
  const then = new Map(was.rules.map((r, i) => [r.name, { ...r, i }]));
  is.rules.forEach((r, i) => {
    if (r.effect !== 'allow') return;
    const denyAfter = is.rules.slice(i + 1).filter((d) => d.effect === 'deny');
    if (is.default !== 'deny' && !denyAfter.length) return;
    const old = then.get(r.name);
    if (!old) return void out.push(`${rule(r)} (allow) added`);
    if (old.effect !== 'allow') return;
    if (old.when !== r.when) return void out.push(`${rule(r)}.when changed (allow)`);
    const overtaken = denyAfter.filter((d) => (then.get(d.name)?.i ?? Infinity) < old.i);
    if (overtaken.length) out.push(`${rule(r)} (allow) moved before ${overtaken.map((d) => `"${d.name}"`).join(', ')}`);
  });
  if (was.default === 'deny' && is.default === 'allow') out.push('policy.default deny → allow');
  return out;
}

function accessLoosenings(was: BackendConfig, is: BackendConfig): string[] {
  const out: string[] = [];
  const [a, b] = [was.access, is.access];
  const at = `backends.${is.name}.access`;
  const droppedScopes = added(b.scopes, a.scopes);
  if (droppedScopes.length) out.push(`${at}.scopes no longer requires ${quoted(droppedScopes)}`);
  if (a.tenants.length && !b.tenants.length) out.push(`${at}.tenants removed (any tenant)`);
  else if (a.tenants.length && added(a.tenants, b.tenants).length) out.push(`${at}.tenants adds ${quoted(added(a.tenants, b.tenants))}`);
  for (const [claim, values] of Object.entries(a.claims)) {
    const nowValues = b.claims[claim];
    if (!nowValues) out.push(`${at}.claims[${JSON.stringify(claim)}] removed`);
    else if (added(values, nowValues).length) out.push(`${at}.claims[${JSON.stringify(claim)}] adds ${quoted(added(values, nowValues))}`);
  }
  const droppedDeny = added(b.tools.deny, a.tools.deny);
  if (droppedDeny.length) out.push(`${at}.tools.deny drops ${quoted(droppedDeny)}`);
  if (a.tools.allow.length && !b.tools.allow.length) out.push(`${at}.tools.allow removed (every tool)`);
  else if (a.tools.allow.length && added(a.tools.allow, b.tools.allow).length) out.push(`${at}.tools.allow adds ${quoted(added(a.tools.allow, b.tools.allow))}`);
  return out;
}

function pinningLoosenings(was: BackendConfig, is: BackendConfig): string[] {
  const out: string[] = [];
  const [a, b] = [was.pinning, is.pinning];
  const at = `backends.${is.name}.pinning`;
  if (PINNING_STRENGTH[b.mode] < PINNING_STRENGTH[a.mode]) out.push(`${at}.mode ${a.mode} → ${b.mode}`);
  if (a.scope === 'user' && b.scope === 'backend') out.push(`${at}.scope user → backend`);
  if (a.lockfile && !b.lockfile) out.push(`${at}.lockfile removed`);
  else if (a.lockfile && b.lockfile !== a.lockfile) out.push(`${at}.lockfile ${a.lockfile} → ${b.lockfile}`);
  return out;
}

/** The `warn` line naming every loosened item, and the count per kind; nothing when the reload loosened nothing. */
export function reportLoosenings(log: FastifyBaseLogger, metrics: Metrics, loosened: readonly Loosening[]): void {
  if (!loosened.length) return;
  const items = loosened.map((l) => l.what);
  log.warn({ loosened: items }, `config reload loosened policy, access or pinning: ${items.join('; ')}`);
  for (const kind of new Set(loosened.map((l) => l.kind))) metrics.configReloadsLoosened.inc({ kind });
}
