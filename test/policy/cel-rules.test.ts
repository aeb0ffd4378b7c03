/**
 * `policy.rules` and the audit record without a gateway (issue 30 §2–§3): compile errors as
 * config errors with the rule and position, first-match decisions that fail closed, listing
 * with the arguments unknown, the variables (credential headers withheld), RFC 8785 hashing
 * and the record's fields.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BackendCaller } from '../../src/backends/backend.js';
import { parseConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { Audit } from '../../src/ops/audit.js';
import { canonicalJson } from '../../src/ops/canonical-json.js';
import { Utf8BatchWriter } from '../../src/ops/utf8-batch-writer.js';
import { CelRules } from '../../src/policy/cel-rules.js';
import { policyVariables } from '../../src/policy/policy-input.js';

function config(extra: Partial<ConfigInput>) {
  return parseConfig({
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' },
    backends: [{ name: 'bank', url: 'http://127.0.0.1:9999/mcp' }],
    ...extra,
  });
}

const RULES = [
  { name: 'admins-delete', effect: 'deny' as const, when: 'mcp.tool.name.startsWith("delete_") && !("admins" in jwt.groups)' },
  { name: 'small-transfers', effect: 'allow' as const, when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount < 1000' },
  { name: 'no-other-transfers', effect: 'deny' as const, when: 'mcp.tool.name == "transfer"' },
];

function caller(claims: Record<string, unknown>, headers: Record<string, string> = {}): BackendCaller {
  return { principal: { iss: 'i', sub: 's', userKey: 'k'.repeat(32), scopes: new Set(), exp: 0, claims }, log: undefined as never, headers, address: '192.0.2.7', url: '/mcp/bank' };
}

const call = (claims: Record<string, unknown>, tool: string, args?: unknown) => policyVariables(caller(claims), { method: 'tools/call', backend: 'bank', tool, arguments: args });
const listing = (claims: Record<string, unknown>, tool: string) => policyVariables(caller(claims), { method: 'tools/call', backend: 'bank', tool }, 'arguments');

describe('policy config', () => {
  test('an invalid expression is a config error naming the rule and the position', () => {
    assert.throws(
      () => config({ policy: { rules: [RULES[0]!, { name: 'broken', effect: 'deny', when: 'mcp.tool.name ==\n  "x" &&' }] } }),
      (err: Error) => /policy\.rules\[1\]\.when/.test(err.message) && /rule "broken"/.test(err.message) && /line 2, column \d+/.test(err.message),
    );
    assert.throws(() => config({ policy: { rules: [{ name: 'typo', effect: 'allow', when: 'mpc.method == "x"' }] } }), /rule "typo" does not compile: Unknown variable: mpc at line 1, column 1/);
  });

  test('rule names are unique; sink file needs a path; the defaults are allow and no audit', () => {
    assert.throws(() => config({ policy: { rules: [RULES[0]!, { ...RULES[2]!, name: 'admins-delete' }] } }), /policy\.rules\[1\]\.name: "admins-delete" is used by an earlier rule/);
    assert.throws(() => config({ audit: { sink: 'file' } }), /audit\.path: is required for sink file/);
    const c = config({});
    assert.equal(c.policy.default, 'allow');
    assert.equal(c.audit.sink, 'none');
  });
});

describe('CelRules', () => {
  const rules = new CelRules(config({ policy: { rules: RULES } }).policy);

  test('first match decides; none → policy.default', () => {
    assert.deepEqual(rules.decide(call({ groups: ['ops'] }, 'delete_account')), { effect: 'deny', rule: 'admins-delete' });
    assert.deepEqual(rules.decide(call({ groups: ['admins'] }, 'delete_account')), { effect: 'allow', rule: 'policy.default' });
    assert.deepEqual(rules.decide(call({}, 'transfer', { amount: 999.5 })), { effect: 'allow', rule: 'small-transfers' });
    assert.deepEqual(rules.decide(call({}, 'transfer', { amount: 1000 })), { effect: 'deny', rule: 'no-other-transfers' });
    const denying = new CelRules(config({ policy: { rules: [], default: 'deny' } }).policy);
    assert.deepEqual(denying.decide(call({}, 'x')), { effect: 'deny', rule: 'policy.default' });
  });

  test('an expression that fails fails closed: a deny rule matches, an allow rule does not', () => {
    assert.deepEqual(rules.decide(call({}, 'delete_account')), { effect: 'deny', rule: 'admins-delete' }, 'no groups claim');
    assert.deepEqual(rules.decide(call({}, 'transfer', { amount: 'lots' })), { effect: 'deny', rule: 'no-other-transfers' });
    assert.deepEqual(rules.decide(call({}, 'transfer', { to: 'x' })), { effect: 'deny', rule: 'no-other-transfers' });
  });

  test('listing: a tool is listed when some call of it could be allowed, the arguments unknown', () => {
    assert.equal(rules.couldAllow(listing({ groups: ['ops'] }, 'transfer')), true, 'a maybe-allow rule that reads the arguments lists it');
    assert.equal(rules.couldAllow(listing({ groups: ['ops'] }, 'delete_account')), false);
    assert.equal(rules.couldAllow(listing({ groups: ['admins'] }, 'delete_account')), true);
    const bigOnly = new CelRules(config({ policy: { rules: [{ name: 'no-big', effect: 'deny', when: 'mcp.tool.arguments.amount > 10' }] } }).policy);
    assert.equal(bigOnly.couldAllow(listing({}, 'transfer')), true, 'a maybe-deny is passed over');
    const allowList = new CelRules(config({ policy: { rules: [{ name: 'read', effect: 'allow', when: 'mcp.tool.name.startsWith("read_")' }], default: 'deny' } }).policy);
    assert.equal(allowList.couldAllow(listing({}, 'read_x')), true);
    assert.equal(allowList.couldAllow(listing({}, 'write_x')), false);
  });

  test('listing templates: a read of some URI could be allowed, the URI unknown', () => {
    const template = (claims: Record<string, unknown>) => policyVariables(caller(claims), { method: 'resources/read', backend: 'bank' }, 'uri');
    const uriRules = new CelRules(
      config({
        policy: {
          rules: [
            { name: 'ledger', effect: 'deny', when: 'mcp.resource.uri.startsWith("bank://ledger")' },
            { name: 'guests', effect: 'deny', when: 'mcp.method == "resources/read" && "guests" in jwt.groups' },
          ],
        },
      }).policy,
    );
    assert.equal(uriRules.couldAllow(template({ groups: [] }), 'uri'), true, 'a maybe-deny on the URI is passed over');
    assert.equal(uriRules.couldAllow(template({ groups: ['guests'] }), 'uri'), false, 'a rule without the URI decides');
    const onlyAccounts = new CelRules(config({ policy: { rules: [{ name: 'accounts', effect: 'allow', when: 'mcp.resource.uri.startsWith("bank://accounts/")' }], default: 'deny' } }).policy);
    assert.equal(onlyAccounts.couldAllow(template({}), 'uri'), true, 'a maybe-allow on the URI lists it');
    assert.equal(onlyAccounts.couldAllow(template({}), 'arguments'), false, 'judged for unknown arguments instead, the failing URI rule does not match');
  });
});

describe('policy variables', () => {
  test('headers lower-case without credentials; address; absent facts are empty', () => {
    const vars = policyVariables(caller({ sub: 's' }, { 'x-team': 'blue', authorization: 'Bearer t', cookie: 'c=1', 'proxy-authorization': 'Basic x' }), { method: 'prompts/get', backend: 'bank', prompt: 'statement' });
    assert.deepEqual(vars.request, { headers: { 'x-team': 'blue' } });
    assert.deepEqual(vars.source, { address: '192.0.2.7' });
    assert.deepEqual(vars.mcp, { method: 'prompts/get', backend: 'bank', tool: { name: '', arguments: {} }, prompt: { name: 'statement' }, resource: { uri: '' } });
  });

  test('rules read the headers, made only when read (issue 44 part 1), as CEL reads any map', () => {
    const rules = new CelRules(
      config({
        policy: {
          rules: [
            { name: 'no-credentials-seen', effect: 'deny', when: '"authorization" in request.headers || has(request.headers.cookie)' },
            { name: 'red-team', effect: 'allow', when: 'request.headers["x-team"] == "red"' },
          ],
          default: 'deny',
        },
      }).policy,
    );
    const facts = { method: 'tools/call', backend: 'bank', tool: 'transfer', arguments: {} };
    const red = caller({ sub: 's' }, { 'x-team': 'red', authorization: 'Bearer t', cookie: 'c=1' });
    assert.deepEqual(rules.decide(policyVariables(red, facts)), { effect: 'allow', rule: 'red-team' });
    assert.deepEqual(rules.decide(policyVariables(caller({ sub: 's' }, { 'x-team': 'blue' }), facts)), { effect: 'deny', rule: 'policy.default' });
    const vars = policyVariables(red, facts) as { request: { headers: unknown } };
    assert.equal(vars.request.headers, vars.request.headers, 'made once per request');
    assert.equal(rules.readsRequest, true);
    assert.deepEqual(rules.decide(policyVariables(red, facts, undefined, rules.readsRequest)), { effect: 'allow', rule: 'red-team' });
  });

  test('rules that never name `request` are offered no headers, and decide as before', () => {
    const rules = new CelRules(config({ policy: { rules: [...RULES], default: 'allow' } }).policy);
    assert.equal(rules.readsRequest, false);
    const who = caller({ sub: 's', groups: ['admins'] }, { 'x-team': 'red' });
    const vars = policyVariables(who, { method: 'tools/call', backend: 'bank', tool: 'transfer', arguments: { amount: 5 } }, undefined, rules.readsRequest) as { request: { headers: unknown } };
    assert.deepEqual(vars.request.headers, {});
    assert.deepEqual(rules.decide(vars), { effect: 'allow', rule: 'small-transfers' });
    assert.deepEqual(rules.decide(policyVariables(who, { method: 'tools/call', backend: 'bank', tool: 'transfer', arguments: { amount: 5000 } }, undefined, false)), { effect: 'deny', rule: 'no-other-transfers' });
  });
});

describe('audit record', () => {
  test('RFC 8785 canonical JSON: sorted keys, no whitespace, ECMAScript numbers', () => {
    assert.equal(canonicalJson({ b: [1, { d: true, c: null }], a: 'é\n', '10': 1e21, '1': 0.5 }), '{"1":0.5,"10":1e+21,"a":"é\\n","b":[1,{"c":null,"d":true}]}');
    assert.equal(canonicalJson(undefined), 'null');
  });

  test('fields: schema, user digest, listed claims, tenant, hash, arguments only under the cap', () => {
    const lines: string[] = [];
    const settings = config({ audit: { sink: 'stdout', claims: ['email'], arguments: { include: true, maxBytes: 64 } } }).audit;
    const audit = new Audit({ write: (l: string) => lines.push(l) }, settings, (claims) => String(claims.org));
    const base = { event: 'call' as const, userKey: 'U'.repeat(32), claims: { sub: 'alice', email: 'a@x', org: 'acme', groups: ['g'] }, endpoint: '/mcp/bank', decision: 'allow' as const, rule: 'r', outcome: 'ok' as const, durationMs: 1.23456 };
    audit.record({ ...base, arguments: { b: 1, a: 2 } });
    audit.record({ ...base, arguments: { big: 'x'.repeat(100) } });
    const [small, big] = lines.map((l) => JSON.parse(l));
    assert.ok(lines[0]!.startsWith('{"schema":"switchboard.audit/v1"'), 'a collector tells audit lines apart by their first field');
    assert.equal(small.user, 'U'.repeat(16));
    assert.deepEqual(small.claims, { email: 'a@x' });
    assert.equal(small.tenant, 'acme');
    assert.equal(small.argumentsSha256, 'd3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772');
    assert.deepEqual(small.arguments, { b: 1, a: 2 });
    assert.equal(small.durationMs, 1.235);
    assert.equal(big.arguments, undefined);
    assert.equal(big.argumentsTruncated, true);
    assert.doesNotMatch(lines.join(''), /alice/);
  });

  test('the line a line sink gets is the JSON of the record a record sink gets: same fields, order, absent ones left out', () => {
    const lines: string[] = [];
    const records: Array<Record<string, unknown>> = [];
    const settings = config({ audit: { sink: 'stdout', claims: ['email', 'missing'], arguments: { include: true, maxBytes: 64 } } }).audit;
    const tenant = (claims: Readonly<Record<string, unknown>>) => (typeof claims.org === 'string' ? claims.org : undefined);
    const asLines = new Audit({ write: (l: string) => lines.push(l) }, settings, tenant);
    const asRecords = new Audit({ write: () => true, writeRecord: (r) => records.push(r) }, settings, tenant);
    // A sink that keeps bytes (`audit.sink: file`): each line written straight into its batch.
    const batch = new Utf8BatchWriter(Buffer.alloc(16));
    let added = 0;
    const asBatch = new Audit({ write: () => assert.fail('a batch sink is not given strings'), batch: () => batch, added: () => void added++ }, settings, tenant);
    const base = { event: 'call' as const, userKey: 'U'.repeat(32), claims: { sub: 'alice', email: 'a"\\x\u2028', org: 'acme' }, decision: 'allow' as const, rule: 'r', outcome: 'ok' as const, durationMs: 1.23456 };
    const events = [
      { ...base, endpoint: '/mcp/bank', backend: 'bank', method: 'tools/call', requestId: 7, tool: 'transfer', arguments: { b: 1, a: [2, 'ü'] }, traceId: 'ab'.repeat(16), session: 's' },
      { ...base, backend: 'bank', method: 'tools/call', requestId: 8, tool: 'transfer', arguments: {}, approval: 'A'.repeat(32), code: -1 },
      { ...base, claims: { sub: 'bob' }, requestId: null, method: 'resources/read', uri: 'file:///x', outcome: 'error' as const, code: -32002, durationMs: NaN },
      { ...base, event: 'refusal' as const, decision: 'deny' as const, requestId: 'id-1', prompt: 'p', arguments: { big: 'x'.repeat(100) } },
    ];
    for (const e of events) {
      asLines.record(e);
      asRecords.record(e);
      asBatch.record(e);
    }
    const withoutTimes = (text: string) => text.replace(/"time":"[^"]+"/g, '"time":""');
    assert.equal(lines.length, events.length);
    assert.equal(added, events.length);
    assert.equal(withoutTimes(batch.view().toString('utf8')), withoutTimes(lines.join('')), 'the batch holds the very lines, one after the other');
    const withoutTime = (text: string) => text.replace(/"time":"[^"]+"/, '"time":""');
    lines.forEach((line, i) => {
      assert.ok(line.endsWith('}\n'));
      assert.equal(withoutTime(line.slice(0, -1)), withoutTime(JSON.stringify(records[i])));
    });
  });
});

test('a record that fails halfway leaves nothing of itself in a batch sink: the lines before and after stay whole', () => {
  const settings = config({ audit: { sink: 'stdout' } }).audit;
  const batch = new Utf8BatchWriter(Buffer.alloc(16));
  const audit = new Audit({ write: () => true, batch: () => batch, added: () => {} }, settings, (claims) => {
    if (claims.org === 'broken') throw new Error('tenant lookup failed');
    return undefined;
  });
  const event = { event: 'call' as const, userKey: 'U'.repeat(32), claims: {}, decision: 'allow' as const, rule: 'r', outcome: 'ok' as const, durationMs: 1 };
  audit.record(event);
  assert.throws(() => audit.record({ ...event, claims: { org: 'broken' } }), /tenant lookup failed/);
  audit.record({ ...event, rule: 'after' });
  const lines = batch.view().toString('utf8').split('\n');
  assert.deepEqual(lines.slice(0, 2).map((l) => JSON.parse(l).rule), ['r', 'after']);
  assert.equal(lines[2], '');
});

describe('broker mode', () => {
  test('the claims rules name are among those broker tokens carry', async () => {
    const { policyClaimNames } = await import('../../src/policy/policy-claims.js');
    const c = config({ policy: { rules: [{ name: 'a', effect: 'deny', when: '!("admins" in jwt.groups) && jwt["https://acme.example/team"] != \'x\' && has(jwt.org) && jwt.sub != ""' }] } });
    const names = policyClaimNames(c);
    for (const name of ['groups', 'https://acme.example/team', 'org']) assert.ok(names.includes(name), names.join());
    assert.ok(!names.includes('sub'), 'claims the broker sets itself are never copied');
  });
});
