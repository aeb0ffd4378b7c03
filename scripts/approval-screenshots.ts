/**
 * The screenshots of the approval pages in docs/policy-and-audit.md (issue 46 "Done when"),
 * taken by a real Chromium (playwright-core, /usr/bin/chromium) of a real run:
 *
 *   node --import tsx scripts/approval-screenshots.ts [--out docs/images]
 *
 * It starts what the confirm e2e tests start (test/helpers/confirm-rig.ts: Redis, the OAuth
 * server, the bank backend, two gateway replicas) with the worked example's rules, has Alice's
 * MCP client (the v1 SDK, declaring URL elicitation) make a transfer the `big-transfers` rule
 * holds and a deletion the four-eyes `account-deletions` rule holds, and photographs:
 *
 * - `approval-page.png`: the page Alice opens from her client's link (who asks, the client,
 *   the server, the tool, the exact arguments, the rule, the expiry, Approve and Deny);
 * - `approvals-list.png`: `/approvals` as Bob, a finance approver, sees it.
 *
 * Everything started is stopped at the end; the whole run is bounded (2 minutes).
 */
import { mkdirSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CONFIRM_AUDIENCE, heldCall, openedAs, startConfirmRig, type ConfirmRig } from '../test/helpers/confirm-rig.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const argv = process.argv.slice(2);
const outDir = resolve(argv.includes('--out') ? argv[argv.indexOf('--out') + 1]! : `${ROOT}docs/images`);
const DEADLINE_MS = 120_000;
/** Narrow, as a browser window beside a chat client (the page's own max width is 36rem); the full page is taken, however tall. */
const VIEWPORT = { width: 680, height: 200 };

async function main(): Promise<void> {
  mkdirSync(outDir, { recursive: true });
  let rig: ConfirmRig | undefined;
  try {
    rig = await startConfirmRig({
      name: 'screenshots',
      rules: [
        { name: 'big-transfers', effect: 'confirm', when: 'mcp.tool.name == "transfer" && mcp.tool.arguments.amount >= 1000', ttl: '10m' },
        { name: 'account-deletions', effect: 'confirm', when: 'mcp.tool.name == "delete_account"', approvers: { claims: { groups: ['finance-approvers'] } }, ttl: '30m' },
      ],
    });
    const token = await rig.idp.token({ sub: 'alice', aud: CONFIRM_AUDIENCE, claims: { name: 'Alice Example', client_id: 'claude-desktop' } });
    const client = new Client({ name: 'screenshots', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
    await client.connect(new StreamableHTTPClientTransport(rig.replicaA.endpoint('bank'), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    rig.clients.push(client);
    await client.listTools();
    const transfer = await heldCall(client, 'transfer', { amount: 5000, to: 'ACME Ltd', memo: 'Invoice 2026-114 <paid in full>' });
    await heldCall(client, 'delete_account', { id: 'acc-7731', reason: 'customer asked' });

    const mine = await openedAs(rig, transfer.url, 'alice', { name: 'Alice Example', email: 'alice@example.com' });
    if (mine.status !== 200) throw new Error(`the approval page answered ${mine.status}: ${mine.text}`);
    await shoot(mine.page, 'approval-page.png');

    const approver = await openedAs(rig, `${rig.replicaB.url}/approvals`, 'bob', { name: 'Bob Finance', groups: ['finance-approvers'] });
    if (!/account-deletions/.test(approver.text)) throw new Error(`/approvals does not list the four-eyes request: ${approver.text}`);
    await shoot(approver.page, 'approvals-list.png');
  } finally {
    await rig?.close();
  }
}

async function shoot(page: import('playwright-core').Page, name: string): Promise<void> {
  const path = `${outDir}/${name}`;
  await page.setViewportSize(VIEWPORT);
  await page.screenshot({ path, fullPage: true });
  process.stderr.write(`wrote ${path} (${statSync(path).size} bytes)\n`);
}

const deadline = setTimeout(() => {
  process.stderr.write(`approval-screenshots: not done within ${DEADLINE_MS / 1000} s; exiting\n`);
  process.exit(1);
}, DEADLINE_MS);
deadline.unref();
main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`approval-screenshots: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
