/**
 * The user's steps of a URL-mode link (SPEC §4), as the browser journeys share them: the
 * -32042 a tool call gets, the link followed in Chromium (sign-in at the gateway's issuer,
 * consent, the provider, the callback), and waiting for what the client then hears.
 */
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { BrowserHandle } from './browser.js';
import { withDeadline } from './deadline.js';
import type { BrowserCookie } from './oauth.js';

export interface UrlElicitation {
  mode: string;
  elicitationId: string;
  url: string;
  message: string;
}

/** Calls `name` and expects -32042 with one URL-mode elicitation, which it returns. */
export async function linkRequired(client: Client, name: string): Promise<UrlElicitation> {
  const refused = await client.callTool({ name, arguments: {} }).then(
    (result) => result,
    (err: unknown) => err,
  );
  assert.ok(refused instanceof McpError, `expected -32042 for ${name}, got ${JSON.stringify(refused)}`);
  assert.equal(refused.code, -32042, refused.message);
  const [elicitation] = (refused.data as { elicitations: UrlElicitation[] }).elicitations;
  assert.equal(elicitation!.mode, 'url');
  return elicitation!;
}

/** What the browser saw on the way, for tests that look for it elsewhere (the audit's secret grep). */
export interface BrowserTrail {
  /** Every URL the browser requested, redirects included (the OAuth `code` and `state` are in them). */
  urls: string[];
  /** The value of every cookie the context held at the end. */
  cookies: string[];
}

/**
 * Follows `link` in a fresh browser context with `cookies` (who signs in where): the consent
 * page (200), Continue, `provider`'s authorization, back to `/oauth/callback/{provider}`,
 * which says to return to the client. Returns the consent page's text; fills `trail` if given.
 */
export async function linkInBrowser(browser: BrowserHandle, link: string, provider: string, cookies: BrowserCookie[], trail?: BrowserTrail): Promise<string> {
  const context = await browser.newContext();
  try {
    await context.addCookies(cookies);
    if (trail) context.on('request', (request) => void trail.urls.push(request.url()));
    const page = await context.newPage();
    const consent = await page.goto(link);
    const consentText = (await page.textContent('body')) ?? '';
    assert.equal(consent?.status(), 200, consentText);
    await Promise.all([page.waitForURL(new RegExp(`/oauth/callback/${provider}\\?`), { timeout: 15_000 }), page.click('button[value="continue"]')]);
    assert.match((await page.textContent('body')) ?? '', /return to your client/i);
    if (trail) trail.cookies.push(...(await context.cookies()).map((c) => c.value));
    return consentText;
  } finally {
    await context.close();
  }
}

/** Waits (bounded: 15 s) until `check` holds. */
export async function eventually(what: string, check: () => boolean): Promise<void> {
  await withDeadline(
    (async () => {
      while (!check()) await new Promise((resolve) => setTimeout(resolve, 100));
    })(),
    15_000,
    `waiting for ${what}`,
  );
}

/**
 * An SDK v1 client connected to `endpoint` with `bearer`, declaring URL-mode elicitation;
 * `completed` collects the ids of the links the gateway says are done.
 */
export async function watchedClient(endpoint: URL, bearer: string, name: string): Promise<{ client: Client; completed: string[] }> {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: { elicitation: { form: {}, url: {} } } });
  const completed: string[] = [];
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => void completed.push(n.params.elicitationId));
  await client.connect(new StreamableHTTPClientTransport(endpoint, { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } }));
  return { client, completed };
}
