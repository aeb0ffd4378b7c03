/**
 * Four-eyes approval of `confirm` rules end to end (issue 46 §1, §3): a rule with
 * `approvers: { claims: { groups: [finance-approvers] } }`, with real parts only — Redis shared
 * by two gateway replicas, the real OAuth server (MCP tokens, and the browser sign-in whose ID
 * token carries `groups`), the bank backend that records every call reaching it, the SDK
 * client v1 and Chromium.
 *
 * The caller's link leads to a waiting page without buttons, and a decision they post
 * themself (with a valid CSRF token of their own session) is refused — even though the caller
 * is in the approvers' group; someone signed in outside the group sees nothing of the call; a
 * matching approver sees it and approves it, and the caller's retry on the other replica runs
 * once; an approver's denial is final; `/approvals` lists only what each viewer may decide;
 * the audit records of each step (no arguments); the `approvals.notify` webhook (a receiver on
 * 127.0.0.1, no arguments), and one aimed at a link-local address refused by the SSRF guard.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { CONFIRM_AUDIENCE as AUDIENCE, decideOn as decide, heldCall as held, openedAs, startConfirmRig, type ConfirmRig } from '../helpers/confirm-rig.js';
import type { GatewayHandle } from '../helpers/gateway.js';
import { userKeyOf } from '../../src/auth/principal.js';
import { argumentsHash } from '../../src/policy/approvals.js';

/** A value no log line and no refusal may carry (an argument of the held calls). */
const MEMO = 'four-eyes-memo <i>payroll</i>';
const APPROVERS = ['finance-approvers'];
let rig: ConfirmRig;
/** Each replica's audit file (arguments opted in: approval records must still carry none). */
let auditDir: string;
const auditPath = (replica: 'A' | 'B') => join(auditDir, `audit-${replica}.jsonl`);

/** What the `approvals.notify` receiver on 127.0.0.1 got: each POST's content type and body. */
const hooks: Array<{ contentType: string | undefined; body: string }> = [];
let receiver: Server;
let hookUrl: string;

function startReceiver(): Promise<string> {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/hook') hooks.push({ contentType: req.headers['content-type'], body: Buffer.concat(chunks).toString() });
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) => receiver.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`)));
}

before(async () => {
  auditDir = await mkdtemp(join(tmpdir(), 'sb-four-eyes-'));
  hookUrl = await startReceiver();
  // Replica A notifies the local receiver; B a link-local address (a cloud metadata service), which the SSRF guard refuses.
  const notifyOf = (replica: 'A' | 'B') => ({ url: replica === 'A' ? hookUrl : 'https://169.254.169.254/latest/hook' });
  rig = await startConfirmRig({
    name: 'four-eyes',
    rules: [
      { name: 'big-transfers', effect: 'confirm', when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount >= 1000', approvers: { claims: { groups: APPROVERS } } },
      { name: 'quick-deletes', effect: 'confirm', when: 'mcp.tool.name == "delete_account" && mcp.tool.arguments.id == "acc-expiring"', ttl: '10s' },
      { name: 'deletes', effect: 'confirm', when: 'mcp.tool.name == "delete_account"' },
    ],
    overrides: (replica) => ({ audit: { sink: 'file', path: auditPath(replica), flushInterval: 0, arguments: { include: true } }, approvals: { notify: notifyOf(replica) } }),
  });
});

after(async () => {
  await rig?.close();
  receiver?.close();
  await rm(auditDir, { recursive: true, force: true });
});

/** The records of both replicas' audit files. */
async function auditRecords(): Promise<Array<Record<string, unknown>>> {
  const texts = await Promise.all((['A', 'B'] as const).map((r) => readFile(auditPath(r), 'utf8').catch(() => '')));
  return texts.flatMap((t) => t.split('\n').filter(Boolean)).map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The value `find` returns once it returns one, within 10 s. */
async function until<T>(find: () => T | undefined): Promise<T> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 50))) {
    const found = find();
    if (found !== undefined) return found;
  }
  throw new Error('not seen within 10 s');
}

/** The events recorded for one approval, in the order written. */
const stepsOf = (records: Array<Record<string, unknown>>, id: string) => records.filter((r) => r.approval === id).map((r) => r.event);
/** Approval ids seen by the tests, to check their audit records at the end. */
const seen: { approved?: string; denied?: string } = {};

/** People: their `sub`, the name their tokens carry, and their groups. */
const ALICE = { sub: 'alice', name: 'Alice Example', groups: APPROVERS };
const BOB = { sub: 'bob', name: 'Bob Approver', groups: APPROVERS };
const MALLORY = { sub: 'mallory', name: 'Mallory Outsider', groups: ['sales'] };
type Person = typeof ALICE;

/** An SDK client of the caller (URL elicitation declared), its access token naming them. */
async function clientOf(gateway: GatewayHandle, who: Person): Promise<Client> {
  const token = await rig.idp.token({ sub: who.sub, aud: AUDIENCE, claims: { name: who.name } });
  const client = new Client({ name: 'four-eyes-client', version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  await client.connect(new StreamableHTTPClientTransport(gateway.endpoint('bank'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  rig.clients.push(client);
  return client;
}

/** A signed-in browser of `who` (ID token: name, email, groups) at `link`. */
const opened = (link: string, who: Person) => openedAs(rig, link, who.sub, { name: who.name, email: `${who.sub}@example.com`, groups: who.groups });

/**
 * Posts a decision on request `id` through the Approve form of another page `page` shows (one
 * the user may decide), its hidden id changed: the browser's own form post, with the
 * session's cookie, its CSRF token and the page's Origin.
 */
async function postThroughForm(page: Page, formUrl: string, id: string): Promise<{ status: number | undefined; text: string }> {
  await page.goto(formUrl);
  await page.locator('input[name="id"]').evaluate((input, value) => ((input as HTMLInputElement).value = value), id);
  const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/approve') && r.request().method() === 'POST'), page.click('button[value="approve"]')]);
  return { status: response.status(), text: (await page.textContent('body')) ?? '' };
}

/** A form post made by hand with the context's cookies and a same-origin Origin header. */
async function postByHand(page: Page, origin: string, form: Record<string, string>): Promise<number> {
  const res = await page.context().request.post(`${origin}/approve`, { form, headers: { origin }, maxRedirects: 0 });
  return res.status();
}

const transfers = () => rig.bank.calls.filter((c) => c === 'transfer').length;

describe('four-eyes approval', () => {
  test('the caller waits and cannot approve; an outsider sees nothing; an approver approves; the retry runs once', async () => {
    const onA = await clientOf(rig.replicaA, ALICE);
    await onA.listTools();
    const args = { amount: 25_000, to: 'supplier', memo: MEMO };
    const asked = await held(onA, 'transfer', args);
    assert.match(asked.message, /approval of another person/);
    assert.equal(transfers(), 0);

    // The caller's link: a waiting page, who may approve, no buttons.
    const waiting = await opened(asked.url, ALICE);
    assert.equal(waiting.status, 200);
    assert.match(waiting.text, /Waiting for approval/);
    assert.match(waiting.text, /groups: finance-approvers/);
    assert.equal(await waiting.page.locator('button[value="approve"], button[value="deny"]').count(), 0);

    // The caller posts an approval anyway, through the form of one of their own requests they
    // may decide (valid session, CSRF token and Origin), its id changed: refused.
    const own = await held(onA, 'delete_account', { id: 'acc-alice' });
    const selfApproval = await postThroughForm(waiting.page, own.url, asked.elicitationId);
    assert.equal(selfApproval.status, 403);
    assert.match(selfApproval.text, /Another person must decide this call/);
    assert.equal((await held(onA, 'transfer', args)).elicitationId, asked.elicitationId, 'still pending: the retry is held on the same request');

    // Signed in outside the approvers' group: refused, nothing of the call shown.
    const outsider = await opened(asked.url, MALLORY);
    assert.equal(outsider.status, 403);
    assert.match(outsider.text, /may not decide this request/);
    for (const secret of ['transfer', '25000', 'four-eyes-memo', 'payroll', 'big-transfers', 'bank', 'Alice']) assert.ok(!outsider.text.includes(secret), `the refusal shows nothing of the call (${secret})`);
    assert.equal(await outsider.page.locator('button[value="approve"]').count(), 0);
    assert.equal(await postByHand(outsider.page, rig.replicaA.url, { id: asked.elicitationId, csrf: 'x', action: 'approve' }), 403);

    // A matching approver: the call as it will run, who asks by name; approves it.
    const approver = await opened(asked.url, BOB);
    assert.equal(approver.status, 200, approver.text);
    assert.match(approver.text, /Approve a call/);
    assert.match(approver.text, /Asked by\s*Alice Example/);
    assert.match(approver.text, /You decide it as Bob Approver/);
    assert.deepEqual(JSON.parse((await approver.page.locator('pre code').textContent()) ?? ''), args);
    assert.match(await decide(approver.page, 'approve'), /Call approved/);
    assert.equal(transfers(), 0, 'approving does not run the call');
    const again = await approver.page.goto(asked.url);
    assert.equal(again?.status(), 410, 'the approver finds it decided');

    // The caller's page tells who approved; the retry on the other replica runs once.
    await waiting.page.goto(asked.url);
    assert.match((await waiting.page.textContent('body')) ?? '', /Approved by\s*Bob Approver/);
    const onB = await clientOf(rig.replicaB, ALICE);
    const result = await onB.callTool({ name: 'transfer', arguments: args });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal(transfers(), 1);
    const next = await held(onB, 'transfer', args);
    assert.notEqual(next.elicitationId, asked.elicitationId, 'single use: the same call again is a new request');
    seen.approved = asked.elicitationId;
    assert.equal(transfers(), 1);
  });

  test("an approver's denial is final", async () => {
    const client = await clientOf(rig.replicaB, ALICE);
    const args = { amount: 40_000, to: 'unknown' };
    const asked = await held(client, 'transfer', args);
    seen.denied = asked.elicitationId;
    const approver = await opened(asked.url, BOB);
    assert.match(await decide(approver.page, 'deny'), /Call denied/);
    const refused = await client.callTool({ name: 'transfer', arguments: args }).then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(refused instanceof McpError);
    assert.equal(refused.code, -32015);
    assert.match(refused.message, /denied by an approver/);
    const waiting = await opened(asked.url, ALICE);
    assert.match(waiting.text, /Denied by\s*Bob Approver/);
    assert.equal((await approver.page.goto(asked.url))?.status(), 410, 'a denied request cannot be approved afterwards');
  });

  test('/approvals lists only what the viewer may decide, on either replica', async () => {
    const client = await clientOf(rig.replicaA, ALICE);
    const theirs = await held(client, 'transfer', { amount: 31_000, to: 'listed' });
    const own = await held(client, 'delete_account', { id: 'acc-listed' });
    const listOf = async (who: Person, gateway: GatewayHandle) => {
      const { page, status } = await opened(`${gateway.url}/approvals`, who);
      assert.equal(status, 200);
      const hrefs = await page.locator('a[href^="/approve?id="]').evaluateAll((links) => links.map((a) => a.getAttribute('href')!));
      return { page, ids: hrefs.map((h) => new URLSearchParams(h.split('?')[1]).get('id')!), text: (await page.textContent('body')) ?? '' };
    };
    const bob = await listOf(BOB, rig.replicaB);
    assert.ok(bob.ids.includes(theirs.elicitationId), "the approver lists the caller's four-eyes request");
    assert.ok(!bob.ids.includes(own.elicitationId), "not the caller's own confirmation");
    assert.match(bob.text, /Alice Example/);
    assert.ok(!bob.text.includes('acc-listed') && !bob.text.includes('31000'), 'no arguments in the list');
    const alice = await listOf(ALICE, rig.replicaA);
    assert.ok(alice.ids.includes(own.elicitationId), 'the caller lists what they confirm themself');
    assert.ok(!alice.ids.includes(theirs.elicitationId), 'not their own four-eyes request, which they may not decide');
    const mallory = await listOf(MALLORY, rig.replicaA);
    assert.deepEqual(mallory.ids, []);
    assert.match(mallory.text, /Nothing waits for your decision/);
    // The list's link opens the approver's page.
    await Promise.all([bob.page.waitForURL(/\/approve\?id=/), bob.page.click(`a[href="/approve?id=${theirs.elicitationId}"]`)]);
    assert.match((await bob.page.textContent('body')) ?? '', /Approve a call/);
  });

  test("audit: requested, approved, denied, used and expired, with who decided and the argument hash, never the arguments; the call's record names its approval", async () => {
    const client = await clientOf(rig.replicaA, ALICE);
    const expiring = await held(client, 'delete_account', { id: 'acc-expiring' });
    await new Promise((resolve) => setTimeout(resolve, 10_500));
    // The caller's next request to hold (or /approvals) notices the expiry, once.
    await held(client, 'delete_account', { id: 'acc-after-expiry' });
    await openedAs(rig, `${rig.replicaB.url}/approvals`, ALICE.sub, { name: ALICE.name });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const all = await auditRecords();
    const records = all.filter((r) => String(r.event).startsWith('approval-'));
    const bobDigest = userKeyOf(rig.idp.issuer, BOB.sub).slice(0, 16);
    const aliceDigest = userKeyOf(rig.idp.issuer, ALICE.sub).slice(0, 16);
    assert.deepEqual(stepsOf(records, seen.approved!), ['approval-requested', 'approval-approved', 'approval-used']);
    assert.deepEqual(stepsOf(records, seen.denied!), ['approval-requested', 'approval-denied']);
    assert.deepEqual(stepsOf(records, expiring.elicitationId), ['approval-requested', 'approval-expired']);
    const approved = records.find((r) => r.approval === seen.approved && r.event === 'approval-approved')!;
    assert.equal(approved.approver, bobDigest, 'who decided, as a digest');
    assert.equal(approved.user, aliceDigest, 'the caller, as a digest');
    assert.equal(approved.rule, 'big-transfers');
    assert.equal(approved.backend, 'bank');
    assert.equal(approved.tool, 'transfer');
    assert.equal(approved.fourEyes, true);
    assert.equal(approved.argumentsSha256, argumentsHash({ amount: 25_000, to: 'supplier', memo: MEMO }));
    const call = all.find((r) => r.event === 'call' && r.approval === seen.approved);
    assert.ok(call, "the call's own record names the approval it used");
    assert.deepEqual([call.rule, call.tool, call.outcome], ['big-transfers', 'transfer', 'ok']);
    const expired = records.find((r) => r.approval === expiring.elicitationId && r.event === 'approval-expired')!;
    assert.equal(expired.rule, 'quick-deletes');
    const text = JSON.stringify(records);
    for (const value of ['four-eyes-memo', 'supplier', 'acc-expiring', 'acc-after-expiry', 'Alice Example', 'Bob Approver']) assert.ok(!text.includes(value), `no argument or name in an approval record (${value})`);
    assert.ok(records.every((r) => !('arguments' in r)));
  });

  test('approvals.notify: each new request is POSTed without arguments; a webhook at a refused address is blocked by the SSRF guard', async () => {
    const onA = await clientOf(rig.replicaA, ALICE);
    const args = { amount: 12_345, to: 'webhook-target', memo: MEMO };
    const asked = await held(onA, 'transfer', args);
    const hook = await until(() => hooks.find((h) => h.body.includes(asked.elicitationId)));
    assert.match(hook.contentType ?? '', /^application\/json/);
    const body = JSON.parse(hook.body) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ['backend', 'caller', 'expiresAt', 'id', 'link', 'rule', 'tool']);
    assert.deepEqual({ ...body, expiresAt: undefined }, { id: asked.elicitationId, link: asked.url, rule: 'big-transfers', backend: 'bank', tool: 'transfer', caller: 'Alice Example', expiresAt: undefined });
    assert.ok(Date.parse(String(body.expiresAt)) > Date.now());
    for (const value of ['12345', 'webhook-target', 'four-eyes-memo']) assert.ok(!hook.body.includes(value), `no argument in the webhook (${value})`);

    // Replica B's webhook is aimed at 169.254.169.254: refused before any connection, logged and
    // counted; the call is held all the same.
    const onB = await clientOf(rig.replicaB, ALICE);
    const heldOnB = await held(onB, 'transfer', { amount: 54_321, to: 'elsewhere' });
    await until(() => rig.logLines.find((l) => l.startsWith('B ') && l.includes('approvals.notify: the webhook could not be reached') && l.includes('"reason":"address"')));
    assert.ok(!rig.logLines.some((l) => l.includes('169.254.169.254/latest/hook')), 'the webhook URL is not logged');
    const metrics = await (await fetch(`${rig.replicaB.url}/metrics`)).text();
    assert.match(metrics, /switchboard_approval_notifications_total\{outcome="address"\} [1-9]/);
    assert.ok(!hooks.some((h) => h.body.includes(heldOnB.elicitationId)), 'nothing reached the receiver from B');

    // A reload that points B's webhook at the receiver applies to B's next request.
    assert.equal(rig.replicaB.app.applyConfig({ ...rig.replicaB.config, approvals: { notify: { url: hookUrl, timeout: 5_000 } } }), 'applied');
    const afterReload = await held(onB, 'transfer', { amount: 54_322, to: 'elsewhere' });
    await until(() => hooks.find((h) => h.body.includes(afterReload.elicitationId)));
  });

  test('no argument value and no token in any log line', () => {
    const logs = rig.logLines.join('');
    assert.match(logs, /caller refused: a four-eyes request is decided by another person/);
    assert.ok(!logs.includes('four-eyes-memo'), 'argument values are not logged');
    assert.ok(!/eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}/.test(logs), 'no JWT is logged');
  });
});
